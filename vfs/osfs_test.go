package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOS_OpenFileDescriptor: OS opens with its own open(2), not
// os.OpenFile; the descriptor it hands out is blocking and close-on-exec,
// whatever the flags, and Close gives it back.
func TestOS_OpenFileDescriptor(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "a")
	for _, flag := range []int{os.O_RDWR | os.O_CREATE, os.O_RDWR | os.O_CREATE, os.O_RDONLY, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_CREATE | os.O_TRUNC} {
		f, err := OS{}.OpenFile(name, flag)
		if err != nil {
			t.Fatalf("OpenFile(%#x): %v", flag, err)
		}
		fd := int(f.(*osFile).f.Fd())
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK != 0 {
			t.Fatalf("OpenFile(%#x): status flags %#x %v, want a blocking descriptor", flag, fl, err)
		}
		fdfl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || fdfl&unix.FD_CLOEXEC == 0 {
			t.Fatalf("OpenFile(%#x): descriptor flags %#x %v, want close-on-exec", flag, fdfl, err)
		}
		if f.Name() != name {
			t.Fatalf("Name() = %q, want %q", f.Name(), name)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Fatalf("descriptor %d after Close: %v, want EBADF", fd, err)
		}
	}
}

// TestOS_OpenErrors: an open's error is an *fs.PathError of op "open"
// naming the path, as os.OpenFile's, and errors.Is finds what callers ask.
func TestOS_OpenErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	existing := filepath.Join(dir, "existing")
	f, err := OS{}.OpenFile(existing, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	check := func(what string, err, want error, path string) {
		t.Helper()
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Op != "open" || pe.Path != path || !errors.Is(err, want) {
			t.Fatalf("%s: %#v, want an *fs.PathError open %s: %v", what, err, path, want)
		}
	}
	_, err = OS{}.OpenFile(missing, os.O_RDONLY)
	check("open of a missing file", err, fs.ErrNotExist, missing)
	_, err = OS{}.OpenFile(existing, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	check("exclusive create of an existing file", err, fs.ErrExist, existing)
	_, err = OS{}.OpenFile(filepath.Join(missing, "x"), os.O_RDWR|os.O_CREATE)
	check("create under a missing directory", err, fs.ErrNotExist, filepath.Join(missing, "x"))
	_, err = OS{}.LockHeld(missing)
	check("lock query of a missing file", err, fs.ErrNotExist, missing)
	err = OS{}.SyncDir(missing)
	check("sync of a missing directory", err, fs.ErrNotExist, missing)
	err = OS{}.SyncDir(existing)
	check("sync of a regular file as a directory", err, unix.ENOTDIR, existing)
	if err := (OS{}).SyncDir(dir); err != nil {
		t.Fatalf("sync of a directory: %v", err)
	}
}
