package api

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports_StandardLibraryOnly: the package builds on the standard
// library alone, so a program that speaks the API (package client)
// builds nothing of the engine through it.
func TestImports_StandardLibraryOnly(t *testing.T) {
	const self = "github.com/narad-io/storage/api"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", self).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	listed := strings.Fields(string(out))
	if len(listed) == 0 || listed[len(listed)-1] != self {
		t.Fatalf("go list -deps named %q, not the package last; the list is wrong", listed)
	}
	for _, path := range listed[:len(listed)-1] {
		t.Errorf("package api depends on %s, which is not the standard library", path)
	}
}
