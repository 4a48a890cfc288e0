package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/vfs/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// implementations runs a test against the real file system and the
// simulated disk, so both keep the same semantics.
func implementations(t *testing.T, test func(t *testing.T, fsys vfs.FS, root string)) {
	t.Run("os", func(t *testing.T) { test(t, vfs.OS{}, t.TempDir()) })
	t.Run("sim", func(t *testing.T) {
		d := sim.NewDisk(1)
		if err := d.MkdirAll("/data"); err != nil {
			t.Fatal(err)
		}
		test(t, d, "/data")
	})
}

func mustWrite(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// mustWriteSynced is mustWrite with the data synced (the name is not).
func mustWriteSynced(t *testing.T, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fsys, name, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFS_FileOperations(t *testing.T) {
	implementations(t, func(t *testing.T, fsys vfs.FS, root string) {
		name := filepath.Join(root, "a")
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("hello ")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("world")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("W"), 6); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "World" {
			t.Fatalf("ReadAt = %d %v %q", n, err, buf)
		}
		if n, err := f.ReadAt(buf, 9); n != 2 || err != io.EOF {
			t.Fatalf("ReadAt past the end = %d %v, want 2 EOF", n, err)
		}
		if err := f.Truncate(5); err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil || fi.Size != 5 || fi.Mode.Perm() != vfs.FileMode {
			t.Fatalf("Stat = %+v %v, want size 5 mode %v", fi, err, vfs.FileMode)
		}
		if err := f.DropCache(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, name); string(got) != "hello" {
			t.Fatalf("content %q, want hello", got)
		}
		if _, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("exclusive create of an existing file: %v, want ErrExist", err)
		}
		if _, err := fsys.OpenFile(filepath.Join(root, "missing"), os.O_RDONLY); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open of a missing file: %v, want ErrNotExist", err)
		}
		// O_TRUNC on an existing file empties it.
		mustWrite(t, fsys, name, []byte("x"))
		if got := mustRead(t, fsys, name); string(got) != "x" {
			t.Fatalf("after O_TRUNC rewrite: %q", got)
		}
		ro, err := fsys.OpenFile(name, os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ro.Write([]byte("no")); err == nil {
			t.Fatal("write to a read-only file succeeded")
		}
		ro.Close()
	})
}

func TestFS_Namespace(t *testing.T) {
	implementations(t, func(t *testing.T, fsys vfs.FS, root string) {
		dir := filepath.Join(root, "topics", "orders", "p00001")
		if err := fsys.MkdirAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(dir); err != nil {
			t.Fatalf("MkdirAll of an existing directory: %v", err)
		}
		for _, d := range []string{filepath.Join(root, "topics"), dir} {
			fi, err := fsys.Stat(d)
			if err != nil || !fi.IsDir() || fi.Mode.Perm() != vfs.DirMode {
				t.Fatalf("Stat(%s) = %+v %v, want a directory of mode %v", d, fi, err, vfs.DirMode)
			}
		}
		if err := fsys.Mkdir(dir); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("Mkdir of an existing directory: %v", err)
		}
		for _, n := range []string{"b.log", "a.log", "c"} {
			mustWrite(t, fsys, filepath.Join(dir, n), []byte(n))
		}
		if err := fsys.Mkdir(filepath.Join(dir, "sub")); err != nil {
			t.Fatal(err)
		}
		entries, err := fsys.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := []vfs.DirEntry{{"a.log", false}, {"b.log", false}, {"c", false}, {"sub", true}}
		if len(entries) != len(want) {
			t.Fatalf("ReadDir = %v, want %v", entries, want)
		}
		for i := range want {
			if entries[i] != want[i] {
				t.Fatalf("ReadDir = %v, want %v", entries, want)
			}
		}
		if err := fsys.Rename(filepath.Join(dir, "c"), filepath.Join(dir, "a.log")); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, filepath.Join(dir, "a.log")); string(got) != "c" {
			t.Fatalf("renamed over: %q", got)
		}
		if err := fsys.Remove(filepath.Join(dir, "b.log")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(filepath.Join(dir, "b.log")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("second remove: %v", err)
		}
		if err := fsys.Remove(dir); err == nil {
			t.Fatal("remove of a non-empty directory succeeded")
		}
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		stale := filepath.Join(root, "topics", "orders.stale-0123456789abcdef")
		if err := fsys.Rename(filepath.Join(root, "topics", "orders"), stale); err != nil {
			t.Fatal(err)
		}
		if got := mustRead(t, fsys, filepath.Join(stale, "p00001", "a.log")); string(got) != "c" {
			t.Fatalf("file under a renamed directory: %q", got)
		}
		if err := fsys.RemoveAll(stale); err != nil {
			t.Fatal(err)
		}
		if ok, err := vfs.Exists(fsys, stale); ok || err != nil {
			t.Fatalf("Exists after RemoveAll = %v %v", ok, err)
		}
		if err := fsys.RemoveAll(stale); err != nil {
			t.Fatalf("RemoveAll of a missing path: %v", err)
		}
	})
}

func TestFS_ReadFileRefusesOversizedFile(t *testing.T) {
	implementations(t, func(t *testing.T, fsys vfs.FS, root string) {
		name := filepath.Join(root, "hwm")
		mustWrite(t, fsys, name, make([]byte, 9))
		if _, err := vfs.ReadFile(fsys, name, 8); !errors.Is(err, vfs.ErrFileTooLarge) {
			t.Fatal("ReadFile of 9 bytes with a limit of 8 succeeded")
		}
	})
}

func TestFS_WriteFileAtomicReplaces(t *testing.T) {
	implementations(t, func(t *testing.T, fsys vfs.FS, root string) {
		name := filepath.Join(root, "meta")
		for _, content := range []string{"one", "two, longer"} {
			if err := vfs.WriteFileAtomic(fsys, name, []byte(content)); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, fsys, name); string(got) != content {
				t.Fatalf("content %q, want %q", got, content)
			}
		}
		if ok, _ := vfs.Exists(fsys, name+vfs.TempSuffix); ok {
			t.Fatal("temporary file left behind")
		}
	})
}

// TestOS_ModesIgnoreUmask: files 0600 and directories 0700 exactly, even
// under a umask that would strip the owner's bits (docs/design.md, "On
// disk"); an existing file keeps its mode.
func TestOS_ModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0o377)
	defer syscall.Umask(old)
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b")
	if err := (vfs.OS{}).MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "a"), dir} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != vfs.DirMode {
			t.Fatalf("%s: mode %v %v, want %v", d, fi.Mode().Perm(), err, vfs.DirMode)
		}
	}
	f, err := (vfs.OS{}).OpenFile(filepath.Join(dir, "seg"), os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, _ := os.Stat(filepath.Join(dir, "seg"))
	if fi.Mode().Perm() != vfs.FileMode {
		t.Fatalf("file mode %v, want %v", fi.Mode().Perm(), vfs.FileMode)
	}
	// A file an older binary made keeps its mode.
	legacy := filepath.Join(dir, "legacy")
	if err := os.WriteFile(legacy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = (vfs.OS{}).OpenFile(legacy, os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(legacy); fi.Mode().Perm() != 0o644 {
		t.Fatalf("existing file's mode changed to %v", fi.Mode().Perm())
	}
}

func TestSim_ClosedFileRefusesCalls(t *testing.T) {
	d := sim.NewDisk(1)
	f, err := d.OpenFile("/f", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatal(err)
	}
	if d.OpenFiles() != 1 {
		t.Fatalf("OpenFiles = %d, want 1", d.OpenFiles())
	}
	f.Close()
	if d.OpenFiles() != 0 {
		t.Fatalf("OpenFiles after close = %d, want 0", d.OpenFiles())
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("sync after close: %v", err)
	}
	if err := f.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func TestSim_RemovedFileStaysReadableThroughItsDescriptor(t *testing.T) {
	d := sim.NewDisk(1)
	mustWrite(t, d, "/f", []byte("data"))
	f, err := d.OpenFile("/f", os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := d.Remove("/f"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := f.ReadAt(buf, 0); err != nil || !bytes.Equal(buf, []byte("data")) {
		t.Fatalf("read after unlink: %q %v", buf, err)
	}
}

func TestSim_EMFILE(t *testing.T) {
	d := sim.NewDisk(1)
	d.SetMaxOpenFiles(2)
	var files []vfs.File
	for i := range 2 {
		f, err := d.OpenFile(filepath.Join("/", string(rune('a'+i))), os.O_RDWR|os.O_CREATE)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if _, err := d.OpenFile("/c", os.O_RDWR|os.O_CREATE); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("third open: %v, want EMFILE", err)
	}
	if ok, _ := vfs.Exists(d, "/c"); ok {
		t.Fatal("a refused create made the file")
	}
	files[0].Close()
	f, err := d.OpenFile("/c", os.O_RDWR|os.O_CREATE)
	if err != nil {
		t.Fatalf("open after a close: %v", err)
	}
	f.Close()
	files[1].Close()
}
