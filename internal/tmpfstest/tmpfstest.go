// Package tmpfstest gives a test a directory on a tmpfs, the file system
// whose fsync persists nothing (its pages are all there is), for the
// tests that must see how the engine judges one (the disk check). It
// looks where Linux keeps one (/dev/shm, /run/shm, the user's runtime
// directory, the temporary directory), makes a directory of its own in
// the first that statfs says is a tmpfs, and removes it at the test's
// end. A test skips only when the machine has none.
package tmpfstest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/narad-io/storage/vfs"
)

// Dir is a new directory on a tmpfs, removed with what it holds when the
// test ends; the test is skipped, saying where it looked, when no tmpfs
// is found.
func Dir(t testing.TB) string {
	t.Helper()
	var tried []string
	for _, candidate := range candidates() {
		info, err := vfs.OS{}.DescribeFS(candidate)
		if err != nil || info.Type != "tmpfs" {
			tried = append(tried, fmt.Sprintf("%s (%s)", candidate, describe(info, err)))
			continue
		}
		dir, err := os.MkdirTemp(candidate, "narad-tmpfstest-")
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (tmpfs, but %v)", candidate, err))
			continue
		}
		t.Cleanup(func() {
			if err := (vfs.OS{}).RemoveAll(dir); err != nil {
				t.Errorf("remove the tmpfs test directory: %v", err)
			}
		})
		return dir
	}
	t.Skipf("no tmpfs on this machine: looked at %s", strings.Join(tried, ", "))
	return ""
}

// candidates are where a Linux system keeps a tmpfs, most likely first.
func candidates() []string {
	out := []string{"/dev/shm", "/run/shm"}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		out = append(out, dir)
	}
	return append(out, filepath.Join("/run/user", fmt.Sprint(os.Getuid())), os.TempDir())
}

func describe(info vfs.FSInfo, err error) string {
	if err != nil {
		return err.Error()
	}
	return info.Type
}
