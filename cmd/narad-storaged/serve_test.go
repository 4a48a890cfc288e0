package main

import (
	"context"
	"errors"
	"testing"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
)

// TestServe_RefusalStandsWhenStoppedMeanwhile: a daemon stopped (SIGTERM)
// while it starts still reports a data directory it may not take (its
// exit 2): only a stop that ends the wait for etcd is a clean exit.
func TestServe_RefusalStandsWhenStoppedMeanwhile(t *testing.T) {
	cfg := defaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Logger = zap.NewNop()
	lock, err := datadir.Acquire(vfs.OS{}, cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := serve(ctx, cfg.Config); !errors.Is(err, datadir.ErrLocked) {
		t.Fatalf("serve on a locked data directory, stopped meanwhile: %v, want ErrLocked", err)
	}
}
