package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// TestDeploy_SystemdUnit: the unit in deploy/ starts the daemon with flags
// it takes, as a Type=notify service with the hardening a storage daemon
// should have.
func TestDeploy_SystemdUnit(t *testing.T) {
	b, err := os.ReadFile("../../deploy/narad-storaged.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			unit[k] = v
		}
	}
	for k, want := range map[string]string{
		"Type": "notify", "NoNewPrivileges": "yes", "ProtectSystem": "strict", "StateDirectory": "narad",
		"LimitNOFILE": "1048576", "ExecReload": "/bin/kill -HUP $MAINPID",
	} {
		if unit[k] != want {
			t.Errorf("%s=%q, want %q", k, unit[k], want)
		}
	}
	args := strings.Fields(unit["ExecStart"])
	if len(args) < 2 || args[1] != "serve" {
		t.Fatalf("ExecStart %q does not run serve", unit["ExecStart"])
	}
	cfg, err := parseServeFlags(args[2:], io.Discard)
	if err != nil || cfg.DataDir != "/var/lib/narad" {
		t.Fatalf("ExecStart's flags: %+v, %v", cfg, err)
	}
}
