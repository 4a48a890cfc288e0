package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// The offline tools' commands: their flags and exit statuses. What the
// tools find and print is tested in package tool.

// onePartition writes one record through the engine into
// dataDir/topics/orders/p00000 and returns that directory and its one
// segment file.
func onePartition(t *testing.T, dataDir string) (dir, segment string) {
	t.Helper()
	dir = filepath.Join(dataDir, wire.TopicsDirName, "orders", "p00000")
	l, err := partition.Open(dir, partition.Options{FS: vfs.OS{}, SegmentMaxBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Produce(context.Background(), []partition.Record{{Key: []byte("key-0"), Value: []byte("value-0")}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	name, err := wire.SegmentFileName(0)
	if err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, name)
}

// verifyText runs the verify command.
func verifyText(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runVerify(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// inspectRun runs the inspect command.
func inspectRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runInspect(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestVerifyUsageErrors(t *testing.T) {
	dataDir := t.TempDir()
	onePartition(t, dataDir)
	noTopics := t.TempDir()
	aFile := filepath.Join(noTopics, "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"unknown flag", []string{"--data-dir", dataDir, "--bogus"}, 2},
		{"positional argument", []string{"--data-dir", dataDir, "extra"}, 2},
		{"bare directory", []string{dataDir}, 2},
		{"empty data dir flag", []string{"--data-dir", ""}, 2},
		{"missing data dir", []string{"--data-dir", filepath.Join(noTopics, "absent")}, 2},
		{"no topics directory", []string{"--data-dir", noTopics}, 2},
		{"a file", []string{"--data-dir", aFile}, 2},
		{"help", []string{"-h"}, 0},
		{"clean", []string{"--data-dir", dataDir}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := verifyText(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if c.code == 2 && stderr == "" {
				t.Error("nothing on stderr")
			}
		})
	}
}

func TestInspectUsageErrors(t *testing.T) {
	dir, segment := onePartition(t, t.TempDir())
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"no file", nil, 2},
		{"two files", []string{segment, segment}, 2},
		{"unknown flag", []string{"--bogus", segment}, 2},
		{"negative max bytes", []string{"--max-bytes", "-1", segment}, 2},
		{"missing file", []string{filepath.Join(dir, "absent.log")}, 2},
		{"a directory", []string{dir}, 2},
		{"help", []string{"-h"}, 0},
		{"flags after the file", []string{segment, "--records", "--json"}, 0},
		{"file after --", []string{"--records", "--", segment}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := inspectRun(t, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout, stderr)
			}
			if c.code == 2 && stderr == "" {
				t.Error("nothing on stderr")
			}
		})
	}
}
