//go:build !unix

package worker

import (
	"context"
	"errors"
)

type fileLock struct{}

// lockFile is not available here: the provenance registry needs flock(2).
func lockFile(context.Context, string, bool) (*fileLock, error) {
	return nil, errors.New("the provenance registry needs flock(2), which this platform lacks")
}

func (l *fileLock) unlock() {}
