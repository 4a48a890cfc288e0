package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
)

// TestE2E_DiskCheckAtStartAndBeside: the daemon probes its data
// directory at start and logs what it took; the command probes the same
// directory while the daemon serves it (it takes no lock of the data
// directory's), and the daemon started with --disk-check-budget 0 logs no
// probe.
func TestE2E_DiskCheckAtStartAndBeside(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "--disk-check-budget", "500ms")
	if !d.waitLog(`"msg":"disk check"`) {
		t.Fatalf("no disk check at start:\n%s", d.log())
	}
	var line struct {
		Duration float64 `json:"duration"`
		Budget   float64 `json:"budget"`
		FSType   string  `json:"fs_type"`
		Rounds   int     `json:"rounds"`
	}
	for _, l := range strings.Split(d.log(), "\n") {
		if strings.Contains(l, `"msg":"disk check"`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line.Budget != 0.5 || line.FSType == "" || line.Rounds < 1 || line.Duration <= 0 {
		t.Fatalf("the disk check's line: %+v\n%s", line, d.log())
	}
	// Floors of 1: a nearly full disk of the machine is no error here.
	out, errOut, code := cli(t, "", "diskcheck", "--data-dir", d.dataDir, "--json", "--min-free-bytes", "1", "--min-free-inodes", "1")
	var doc struct {
		Errors int `json:"errors"`
		Rounds int `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.Errors != 0 || doc.Rounds < 1 || !strings.Contains(errOut, "run it under the daemon's limit") {
		t.Fatalf("diskcheck beside the daemon: exit %d, %+v, %v\n%s%s", code, doc, err, out, errOut)
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	off := startDaemon(t, t.TempDir(), "--disk-check-budget", "0")
	if strings.Contains(off.log(), `"msg":"disk check"`) {
		t.Fatalf("a disk check with it off:\n%s", off.log())
	}
	if err := off.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
