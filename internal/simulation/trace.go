package simulation

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"io/fs"
	"os"
	"path"
	"sync"

	"github.com/narad-io/storage/vfs/sim"
	"github.com/narad-io/storage/wire"
)

// trace records a run's file calls, in the order the disk saw them, and
// the disks its crashes left and its end left: two executions of one
// (seed, run) replay it exactly when their traces are equal.
//
// The data directory's lock file holds the process's pid
// (datadir.Acquire): the length of its write and its bytes are the
// process's, not the run's, and the trace leaves them out.
//
// Invariants, under mu: sum has absorbed every call counted in calls and
// every disk hashed, in order; lines lists them too when keep is set.
type trace struct {
	mu    sync.Mutex
	sum   hash.Hash64
	calls int
	keep  bool
	lines []string
}

var lockFile = path.Join(dataDir, wire.LockFileName)

// pinLock writes a pid of the run's own over the data directory's lock
// file, synced, once a node started: the process's pid (datadir.Acquire)
// has a length of its own, counted in the disk's use and in what a crash
// plan draws from, and two processes whose pids differ in length would
// part.
func (r *runner) pinLock() {
	f, err := r.d.OpenFile(lockFile, os.O_WRONLY)
	r.must("open the lock file", err)
	defer f.Close()
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte("1\n"), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	r.must("pin the lock file's pid", err)
}

func newTrace(keep bool) *trace { return &trace{sum: fnv.New64a(), keep: keep} }

// attach makes d report every call to the trace.
func (tr *trace) attach(d *sim.Disk) {
	d.SetHook(func(c sim.Call) error {
		tr.call(c)
		return nil
	})
}

// call adds one file call.
func (tr *trace) call(c sim.Call) {
	if c.Path == lockFile && c.Op == sim.OpWrite {
		c.Len = 0 // the pid's digits
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var b [8 * 3]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(c.Off))
	binary.LittleEndian.PutUint64(b[8:], uint64(c.Len))
	binary.LittleEndian.PutUint64(b[16:], uint64(c.Flag))
	for _, s := range []string{string(c.Op), c.Path, c.Path2} {
		tr.sum.Write([]byte(s))
		tr.sum.Write([]byte{0})
	}
	tr.sum.Write(b[:])
	tr.calls++
	if tr.keep {
		tr.lines = append(tr.lines, fmt.Sprintf("%s %s %s off %d len %d flag %#x", c.Op, c.Path, c.Path2, c.Off, c.Len, c.Flag))
	}
}

// disk adds what d holds: every name, and every file's bytes but the lock
// file's. d must have no hook (its reads would be traced).
func (tr *trace) disk(d *sim.Disk) {
	h := fnv.New64a()
	var walk func(dir string)
	walk = func(dir string) {
		entries, err := d.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return
		}
		for _, e := range entries { // sorted by name
			p := path.Join(dir, e.Name)
			h.Write([]byte(p))
			h.Write([]byte{0})
			switch {
			case e.IsDir:
				walk(p)
			case p != lockFile:
				b, _ := d.Contents(p)
				h.Write(b)
			}
		}
	}
	walk("/")
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h.Sum64())
	tr.sum.Write([]byte("disk"))
	tr.sum.Write(b[:])
	if tr.keep {
		tr.lines = append(tr.lines, fmt.Sprintf("disk %x", b))
	}
}

// note adds a line of the run's own (an operation) to the kept lines, so
// they show where each operation's calls begin. It is not in the sum: a
// background task an operation woke (a reaper pass a retention change
// asks for) may make its calls before or after the operation's line,
// while the calls themselves come in one order.
func (tr *trace) note(line string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.keep {
		tr.lines = append(tr.lines, "== "+line)
	}
}
