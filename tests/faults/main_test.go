package faults

import (
	"testing"

	"github.com/writ-dev/writ/internal/testing/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
