package main

import (
	"errors"

	"github.com/writ-dev/writ/events"
	"os"
	"path/filepath"

	"github.com/writ-dev/writ/audit/projection"
	"github.com/writ-dev/writ/fsm"
)

var wantDigest events.Hash

func projVariant(raw [][]byte) func(*fsm.State) error {
	return func(*fsm.State) error {
		dir, _ := os.MkdirTemp("", "projab")
		defer os.RemoveAll(dir)
		d, err := projection.Open(projection.DefaultConfig(filepath.Join(dir, "p.db")))
		if err != nil {
			return err
		}
		defer d.Close()
		for i, b := range raw {
			if err := d.Apply(b, uint64(i+1)); err != nil {
				return err
			}
		}
		if err := d.Flush(); err != nil {
			return err
		}
		if d.Digest() != wantDigest {
			return errors.New("projection digest differs")
		}
		return nil
	}
}
