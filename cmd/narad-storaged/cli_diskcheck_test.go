package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/internal/tmpfstest"
	"github.com/narad-io/storage/server"
)

// The diskcheck command: its flags, the config file, and its exit
// statuses. What the probe measures and finds is tested in package
// diskcheck, its startup run in package server.

func diskCheckRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runDiskCheck(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestDiskCheck_ExitStatuses: 0 with no error (warnings allowed unless
// --strict), 1 with an error finding (a floor no disk meets), 2 for a
// usage error or a directory that cannot be probed.
func TestDiskCheck_ExitStatuses(t *testing.T) {
	dir := t.TempDir()
	aFile := filepath.Join(dir, "file")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"help", []string{"-h"}, 0, ""},
		{"unknown flag", []string{"--data-dir", dir, "--bogus"}, 2, ""},
		{"positional argument", []string{dir}, 2, "goes in --data-dir"},
		{"empty data dir", []string{"--data-dir", ""}, 2, "empty"},
		{"missing data dir", []string{"--data-dir", filepath.Join(dir, "absent")}, 2, "no such file"},
		{"a file", []string{"--data-dir", aFile}, 2, "not a directory"},
		{"no budget", []string{"--data-dir", dir, "--budget", "0s"}, 2, "positive"},
		{"under the floor", []string{"--data-dir", dir, "--min-free-bytes", "4611686018427387904"}, 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := diskCheckRun(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.says) {
				t.Fatalf("exit %d, want %d; stderr %q, want it to say %q", code, c.code, stderr, c.says)
			}
		})
	}
	code, out, stderr := diskCheckRun(t, "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "disk check of "+dir+"\n") || !strings.Contains(out, "\n0 errors, ") || stderr != "" {
		t.Fatalf("the test's directory: exit %d\n%s%s", code, out, stderr)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the probe left %v (%v)", entries, err)
	}
}

// TestDiskCheck_TmpfsIsAnError: on a tmpfs the command says it is an
// error (the data would not survive a reboot) and exits 1, --strict or
// not.
func TestDiskCheck_TmpfsIsAnError(t *testing.T) {
	dir := tmpfstest.Dir(t)
	code, out, _ := diskCheckRun(t, "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "error    fs_type      tmpfs: a tmpfs keeps its files in memory only") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if code, out, _ := diskCheckRun(t, "--data-dir", dir, "--strict"); code != 1 {
		t.Fatalf("--strict on a tmpfs: exit %d\n%s", code, out)
	}
}

// TestDiskCheck_BesideADaemonNamesWhoseLimit: beside a holder of the data
// directory's lock (a daemon serving it), the command says on stderr
// that the descriptors check read its own open-file limit, not the
// daemon's; stdout's JSON stays one document. Alone it says nothing.
func TestDiskCheck_BesideADaemonNamesWhoseLimit(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := diskCheckRun(t, "--data-dir", dir, "--json"); code != 0 || stderr != "" {
		t.Fatalf("alone: exit %d, stderr %q", code, stderr)
	}
	lock, err := datadir.Acquire(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	code, out, stderr := diskCheckRun(t, "--data-dir", dir, "--json")
	var doc map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil ||
		!strings.Contains(stderr, fmt.Sprintf("is served by process %d", os.Getpid())) || !strings.Contains(stderr, "run it under the daemon's limit") {
		t.Fatalf("beside a holder: exit %d, stderr %q\n%s", code, stderr, out)
	}
}

// TestDiskCheck_JSONAndConfigFile: --json prints one document; serve's
// config file gives the data directory, floors and budget, and a flag
// wins over it.
func TestDiskCheck_JSONAndConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "config.json")
	config := `{"data_dir": "` + dir + `", "min_free_bytes": 4611686018427387904, "min_free_inodes": 5, "max_open_logs": 100, "max_connections": 50, "listen": "0.0.0.0:1"}`
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Dir  string `json:"dir"`
		Free struct {
			FloorBytes  uint64 `json:"floor_bytes"`
			FloorInodes uint64 `json:"floor_inodes"`
		} `json:"free"`
		Descriptors struct {
			OpenLogs int    `json:"open_logs"`
			Needed   uint64 `json:"needed"`
		} `json:"descriptors"`
		Errors int `json:"errors"`
	}
	decode := func(out string) {
		t.Helper()
		doc.Errors = -1
		if err := json.NewDecoder(strings.NewReader(out)).Decode(&doc); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
	}
	code, out, stderr := diskCheckRun(t, "--config", file, "--json")
	decode(out)
	if code != 1 || doc.Dir != dir || doc.Free.FloorBytes != 1<<62 || doc.Free.FloorInodes != 5 || doc.Descriptors.OpenLogs != 100 || doc.Descriptors.Needed != 100*4+256+50 || doc.Errors != 1 {
		t.Fatalf("exit %d, %+v\n%s%s", code, doc, out, stderr)
	}
	code, out, _ = diskCheckRun(t, "--config", file, "--json", "--min-free-bytes", "0")
	decode(out)
	if code != 0 || doc.Free.FloorBytes != 0 || doc.Errors != 0 {
		t.Fatalf("a flag over the file: exit %d, %+v", code, doc)
	}
	if code, _, stderr := diskCheckRun(t, "--config", filepath.Join(dir, "absent.json")); code != 2 || !strings.Contains(stderr, "config file") {
		t.Fatalf("a missing config file: exit %d, %s", code, stderr)
	}
}

// TestConfig_DiskCheckBudget: serve's --disk-check-budget and its key in
// the config file; 0 turns the check off, a negative one is refused.
func TestConfig_DiskCheckBudget(t *testing.T) {
	cfg, err := parseServeFlags(nil, io.Discard)
	if err != nil || cfg.DiskCheckBudget != server.Duration(500*time.Millisecond) {
		t.Fatalf("default: %v, %v", cfg.DiskCheckBudget, err)
	}
	if cfg, err = parseServeFlags([]string{"--disk-check-budget", "0"}, io.Discard); err != nil || cfg.DiskCheckBudget != 0 {
		t.Fatalf("off: %v, %v", cfg.DiskCheckBudget, err)
	}
	if _, err = parseServeFlags([]string{"--disk-check-budget", "-1s"}, io.Discard); err == nil || !strings.Contains(err.Error(), "disk-check-budget") {
		t.Fatalf("negative: %v", err)
	}
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(`{"disk_check_budget": "2s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = parseServeFlags([]string{"--config", file}, io.Discard); err != nil || cfg.DiskCheckBudget != server.Duration(2*time.Second) {
		t.Fatalf("from the file: %v, %v", cfg.DiskCheckBudget, err)
	}
}
