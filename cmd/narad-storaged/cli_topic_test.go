package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestParseMillis: milliseconds as given, human durations exactly, and a
// clear refusal of anything else.
func TestParseMillis(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "604800000": 604800000, "7d": 604800000, "1w": 604800000, "36h": 129600000,
		"1d12h": 129600000, "90m": 5400000, "1h30m": 5400000, "250ms": 250, "0d": 0,
	} {
		if got, err := parseMillis(in); err != nil || got != want {
			t.Errorf("parseMillis(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "7x", "d", "1.5d", "-1h", "+1h", "1d-1h", "1us", "99999999999999d", "106752d", "106751d24h"} {
		if got, err := parseMillis(in); err == nil {
			t.Errorf("parseMillis(%q) = %d; want an error", in, got)
		}
	}
}

// TestParseBytes: bytes as given, decimal and binary units in any case,
// and a clear refusal of anything else.
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "10737418240": 10 << 30, "10GiB": 10 << 30, "10gib": 10 << 30, "500MB": 500e6,
		"1KiB": 1024, "1kb": 1000, "3B": 3, "2TiB": 2 << 40,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "10XB", "1.5GiB", "GiB", "10 GiB", "9999999999TiB"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d; want an error", in, got)
		}
	}
}

// FuzzParseRetention: any input is read or refused, never a panic or a
// negative bound.
func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"7d", "1d12h", "10GiB", "500MB", "0", "-1", "1w", "9999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ms, err := parseMillis(s); err == nil && ms < 0 {
			t.Fatalf("parseMillis(%q) = %d", s, ms)
		}
		if n, err := parseBytes(s); err == nil && n < 0 {
			t.Fatalf("parseBytes(%q) = %d", s, n)
		}
	})
}

// TestCompletion_TopicSubcommands: the bash completion offers topic's
// subcommands second, then the flags of the one given.
func TestCompletion_TopicSubcommands(t *testing.T) {
	var script, errb bytes.Buffer
	if code := runCompletion([]string{"bash"}, nil, &script, &errb); code != 0 {
		t.Fatalf("completion bash: exit %d, %s", code, errb.String())
	}
	dir := t.TempDir()
	complete := func(words ...string) string {
		t.Helper()
		prog := script.String() + "COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" +
			string(rune('0'+len(words)-1)) + "; _narad_storaged; echo \"${COMPREPLY[*]}\"\n"
		cmd := exec.Command("bash", "-c", prog)
		cmd.Dir = dir // compgen -f offers the files of the directory too: none here
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := complete("narad-storaged", "to"); got != "topic" {
		t.Errorf("the command: %q", got)
	}
	if got := complete("narad-storaged", "topic", "d"); got != "describe delete dictionaries" {
		t.Errorf("topic's subcommands: %q", got)
	}
	if got := complete("narad-storaged", "topic", "create", "--p"); got != "--partitions" {
		t.Errorf("topic create's flags: %q", got)
	}
	if got := complete("narad-storaged", "topic", "list", "--"); got != "--addr --auth-token-file --json --tls-ca" {
		t.Errorf("topic list's flags: %q", got)
	}
	if got := complete("narad-storaged", "topic", "train-dictionary", "--m"); got != "--max-bytes" {
		t.Errorf("topic train-dictionary's flags: %q", got)
	}
}
