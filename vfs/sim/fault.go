package sim

import (
	"errors"
	"path"
)

// Op names a kind of call on a Disk, for faults and hooks.
type Op string

// The calls a Disk can fail, delay or trace.
const (
	OpOpen      Op = "open" // OpenFile, creating or not
	OpRead      Op = "read" // Read, ReadAt
	OpWrite     Op = "write"
	OpSync      Op = "sync" // File.Sync (fdatasync)
	OpTruncate  Op = "truncate"
	OpStat      Op = "stat" // FS.Stat and File.Stat
	OpClose     Op = "close"
	OpDropCache Op = "dropcache"
	OpAllocate  Op = "allocate" // File.Allocate
	OpSetTime   Op = "settime"  // File.SetModTime
	OpMkdir     Op = "mkdir"    // Mkdir, MkdirAll
	OpRemove    Op = "remove"   // Remove, RemoveAll
	OpRename    Op = "rename"
	OpReadDir   Op = "readdir"
	OpSyncDir   Op = "syncdir"
	OpLock      Op = "lock" // FS.Lock, after its open
	OpFree      Op = "free" // FS.Free
)

// Call is one call on a Disk as faults and hooks see it.
type Call struct {
	Op    Op
	Path  string // cleaned; the source of a rename
	Path2 string // the target of a rename
	Off   int64  // read or write offset; the size of a truncate
	Len   int    // bytes read or written
	Flag  int    // an open's flags (os.O_CREATE, ...)
}

// Fault describes calls to fail or to lie about.
//
// A call matches when its Op is Op, its path (either path of a rename)
// matches the Path pattern (path.Match syntax; "" matches every path) and,
// for reads and writes with Len > 0, its byte range overlaps [Off, Off+Len).
// Matching calls are counted; the Nth (1-based) fails, and with Sticky every
// later one too. Nth 0 fails every matching call.
type Fault struct {
	Op     Op
	Path   string
	Nth    int
	Sticky bool
	Off    int64
	Len    int64

	// Err is what the call fails with, e.g. syscall.EIO or syscall.ENOSPC.
	Err error
	// Short, for writes: this many bytes reach the file before the call
	// fails (with Err, or io.ErrShortWrite if Err is nil).
	Short int
	// Lie, for OpSync and OpSyncDir: report success and persist nothing.
	Lie bool
}

// Injection is a fault in force on a Disk.
type Injection struct {
	fault   Fault
	matched int // calls that matched; guarded by Disk.mu
	fired   int // calls that failed or lied; guarded by Disk.mu
	removed bool
	disk    *Disk
}

// Fired is the number of calls the fault has failed or lied to so far.
func (in *Injection) Fired() int {
	in.disk.mu.Lock()
	defer in.disk.mu.Unlock()
	return in.fired
}

// Remove lifts the fault: later calls are not counted or failed.
func (in *Injection) Remove() {
	in.disk.mu.Lock()
	defer in.disk.mu.Unlock()
	in.removed = true
}

// Inject puts a fault in force until it is removed. It panics on a fault
// that cannot be: one with none of Err, Lie and Short, a lie from a call
// other than a sync, a short call other than a write.
func (d *Disk) Inject(f Fault) *Injection {
	switch {
	case f.Err == nil && !f.Lie && f.Short == 0:
		panic("sim: a Fault needs Err, Lie or Short")
	case f.Lie && f.Op != OpSync && f.Op != OpSyncDir:
		panic("sim: only a sync can lie")
	case f.Short != 0 && f.Op != OpWrite:
		panic("sim: only a write can be short")
	}
	in := &Injection{fault: f, disk: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = append(d.faults, in)
	return in
}

// SetHook installs a function called before every call, outside the disk's
// lock (so it may block, e.g. on a channel, to hold one call back while
// others go on). A non-nil error fails the call with it. Nil removes it.
func (d *Disk) SetHook(hook func(Call) error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hook = hook
}

// Hook returns the hook SetHook installed, or nil: a caller that holds
// calls back for a while installs one that calls it on, then puts it back.
func (d *Disk) Hook() func(Call) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hook
}

// errLie and errShortWrite are internal verdicts of enter, never returned.
var (
	errLie        = errors.New("sim: lie")
	errShortWrite = errors.New("sim: short write")
)

// enter runs the hook and the faults for a call. It returns nil to go on,
// errLie for a sync that must report success and persist nothing, or the
// error to fail with.
func (d *Disk) enter(c Call) error {
	_, err := d.enterWrite(c)
	return err
}

// enterWrite is enter that also returns, for a short write, the bytes that
// reach the file before it fails (with errShortWrite when the fault gave no
// error of its own).
func (d *Disk) enterWrite(c Call) (short int, err error) {
	d.mu.Lock()
	hook := d.hook
	d.mu.Unlock()
	if hook != nil {
		if err := hook(c); err != nil {
			return 0, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, in := range d.faults {
		if in.removed || !in.fault.matches(c) {
			continue
		}
		in.matched++
		f := in.fault
		if f.Nth != 0 && in.matched != f.Nth && !(f.Sticky && in.matched > f.Nth) {
			continue
		}
		in.fired++
		switch {
		case f.Lie:
			return 0, errLie
		case f.Short > 0 && f.Err == nil:
			return f.Short, errShortWrite
		default:
			return f.Short, f.Err
		}
	}
	return 0, nil
}

func (f Fault) matches(c Call) bool {
	if f.Op != c.Op {
		return false
	}
	if f.Path != "" && !globMatch(f.Path, c.Path) && (c.Path2 == "" || !globMatch(f.Path, c.Path2)) {
		return false
	}
	if f.Len > 0 && (c.Op == OpRead || c.Op == OpWrite) {
		end := c.Off + int64(c.Len)
		if end <= f.Off || c.Off >= f.Off+f.Len {
			return false
		}
	}
	return true
}

func globMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
