package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine is what a run ran on.
type Machine struct {
	CPUs       int    `json:"cpus"`
	CPU        string `json:"cpu"`
	MemoryGiB  int    `json:"memory_gib"`
	Kernel     string `json:"kernel"`
	FileSystem string `json:"file_system"` // of the data directory
	Go         string `json:"go"`
}

func (m Machine) String() string {
	return fmt.Sprintf("%d CPUs (%s), %d GiB, Linux %s, %s, %s", m.CPUs, m.CPU, m.MemoryGiB, m.Kernel, m.FileSystem, m.Go)
}

// DescribeMachine reads what a run ran on; dir is the data directory.
func DescribeMachine(dir string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", FileSystem: "unknown"}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemoryGiB = int((uint64(si.Totalram)*uint64(si.Unit) + 1<<29) >> 30)
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		m.FileSystem = fsName(st.Type)
	}
	return m
}

func fsName(magic int64) string {
	switch magic {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs (not a disk: fdatasync is free)"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("file system 0x%x", magic)
}
