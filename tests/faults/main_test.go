package faults

import (
	"testing"

	"github.com/writ-dev/writ/internal/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
