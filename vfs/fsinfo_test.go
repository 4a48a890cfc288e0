package vfs_test

import (
	"testing"

	"github.com/narad-io/storage/internal/tmpfstest"
	"github.com/narad-io/storage/vfs"
)

// TestOS_DescribeFS: statfs names a tmpfs, which has no block device of
// its own, and the test's temporary directory on the real disk as
// something (a type the table names, or its number), and says nothing
// of a write cache there is no device for.
func TestOS_DescribeFS(t *testing.T) {
	shm, err := vfs.OS{}.DescribeFS(tmpfstest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	if shm.Type != "tmpfs" || shm.Magic != 0x01021994 || shm.Device != "" || shm.WriteCache != "" {
		t.Fatalf("a tmpfs described as %+v", shm)
	}
	disk, err := vfs.OS{}.DescribeFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if disk.Magic == 0 || disk.Type == "" || disk.Type != vfs.FSTypeName(disk.Magic) {
		t.Fatalf("the temporary directory's file system described as %+v", disk)
	}
	if disk.Device == "" && disk.WriteCache != "" {
		t.Fatalf("a write cache without a device: %+v", disk)
	}
	switch disk.WriteCache {
	case "", vfs.WriteBack, vfs.WriteThrough:
	default:
		t.Fatalf("write cache %q is none of sysfs's values", disk.WriteCache)
	}
	t.Logf("the temporary directory: %+v", disk)
	if _, err := (vfs.OS{}).DescribeFS(t.TempDir() + "/absent"); err == nil {
		t.Fatal("a missing path described")
	}
}

func TestFSTypeName(t *testing.T) {
	for magic, want := range map[uint32]string{0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x01021994: "tmpfs", 0x794C7630: "overlayfs", 0x6969: "nfs", 0x12345678: "0x12345678"} {
		if got := vfs.FSTypeName(magic); got != want {
			t.Errorf("FSTypeName(%#x) = %q, want %q", magic, got, want)
		}
	}
}
