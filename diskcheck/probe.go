package diskcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"time"

	"github.com/narad-io/storage/vfs"
)

// The probe's size and its default bound.
const (
	// DefaultBudget is the time after which the probe begins no new round.
	DefaultBudget = 500 * time.Millisecond
	// DefaultRounds is how many rounds it takes at most: a round is a
	// 4 KiB append and its fdatasync, then an overwrite of that block and
	// its fdatasync, and every dirEvery rounds a directory fsync after a
	// create and one after a remove.
	DefaultRounds = 64

	blockSize      = 4 << 10
	dirEvery       = 8
	fallocateBytes = 64 << 10
)

// Options says where to probe, within what time, and what to hold the
// findings against.
type Options struct {
	// Dir is the directory to probe: a data directory, or the one a node
	// is to serve. It must exist; the probe writes only its own files
	// there (wire.DiskCheckProbePrefix).
	Dir string
	// FS is the file system (nil: vfs.OS). An FS that is a
	// vfs.FSDescriber has its type checked; the fs_type check is skipped
	// for one that is not.
	FS vfs.FS
	// Budget bounds the rounds: none begins once it is spent, though the
	// first always runs, and a call under way (a flush cannot be
	// interrupted) is waited for. 0: DefaultBudget.
	Budget time.Duration
	// Rounds is the most rounds the probe takes (0: DefaultRounds).
	Rounds int
	// MinFreeBytes and MinFreeInodes are the node's floors (0: off).
	MinFreeBytes, MinFreeInodes uint64
	// Descriptors is the open-file limit against the node's open-log
	// budget; nil skips that check.
	Descriptors *Descriptors
	// Now is the clock the probe times its calls and its budget with
	// (nil: time.Now); tests give a fake one.
	Now func() time.Time
	// MemoryFSIsError makes a file system that keeps its files in memory
	// only (tmpfs, ramfs) an Error rather than a Warning: the command's
	// verdict (every record would be gone at a reboot), where a node's
	// start only warns (a test or a throwaway node may run on one).
	MemoryFSIsError bool
	// Watch, if set, says while the probe runs which call it is in: a
	// caller that stops waiting for it names what holds it.
	Watch *Watch
}

// Probe measures Dir's file system and judges what it found (the
// findings of every check, in Report.Findings). It removes the probe
// files a crashed probe left, and its own before it returns, whatever
// failed. A failing write, flush or fsync is a finding, not an error:
// the error is for a directory that cannot be probed at all (missing,
// not a directory) and for ctx's end, which stops the rounds (the report
// so far comes with it).
//
// It costs at most the budget and one round (the first round always
// runs), the fixed calls around them (statfs, a listing, the create, a
// reservation and the removes), and a call under way when the budget
// ends; but a call that never returns (a flush on a failing device)
// holds it for ever: a caller that must go on runs it in a goroutine and
// names the call from Options.Watch.
func Probe(ctx context.Context, opts Options) (Report, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Watch == nil {
		opts.Watch = &Watch{}
	}
	describer, describes := opts.FS.(vfs.FSDescriber)
	fsys := watchedFS{FS: opts.FS, w: opts.Watch, now: opts.Now}
	opts.FS = fsys
	if opts.Budget <= 0 {
		opts.Budget = DefaultBudget
	}
	if opts.Rounds <= 0 {
		opts.Rounds = DefaultRounds
	}
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	fi, err := opts.FS.Stat(opts.Dir)
	if err != nil {
		return Report{}, fmt.Errorf("diskcheck: %w", err)
	}
	if !fi.IsDir() {
		return Report{}, fmt.Errorf("diskcheck: %s is not a directory", opts.Dir)
	}
	start := opts.Now()
	r := Report{Dir: opts.Dir, Budget: opts.Budget, RoundsPlanned: opts.Rounds,
		MinFreeBytes: opts.MinFreeBytes, MinFreeInodes: opts.MinFreeInodes, Descriptors: opts.Descriptors,
		memoryFSIsError: opts.MemoryFSIsError}
	if describes {
		r.FS, r.FSErr = fsys.describe(describer, opts.Dir)
	} else {
		r.FSErr = errors.New("the file system interface given does not describe file systems (vfs.FSDescriber)")
	}
	r.Free, r.FreeErr = opts.FS.Free(opts.Dir)
	r.LeftoversRemoved, r.CleanupErr = removeLeftovers(opts.FS, opts.Dir)
	p := &prober{fsys: opts.FS, dir: opts.Dir, now: opts.Now, buf: make([]byte, blockSize)}
	err = p.run(ctx, &r, start.Add(opts.Budget), opts.Rounds)
	r.Ended = opts.Now()
	r.Duration = r.Ended.Sub(start)
	r.Findings = judge(r)
	return r, err
}

// prober takes the samples, in one probe file it creates and removes.
type prober struct {
	fsys vfs.FS
	dir  string
	now  func() time.Time
	buf  []byte

	append, overwrite, dirFsync []time.Duration
}

// run creates the probe file, takes the rounds until the deadline, tries
// a reservation, and removes the file: every failure goes in r, but
// ctx's end, which is returned.
func (p *prober) run(ctx context.Context, r *Report, deadline time.Time, rounds int) (err error) {
	names, f, cerr := createOwn(p.fsys, p.dir) // locked: a concurrent probe's cleanup leaves it be
	defer func() {
		if rerr := removeOwn(p.fsys, p.dir, names, f); rerr != nil && r.CleanupErr == nil {
			r.CleanupErr = rerr
		}
		r.Append, r.Overwrite, r.DirFsync = summarize(p.append, r.Append.Err), summarize(p.overwrite, r.Overwrite.Err), summarize(p.dirFsync, r.DirFsync.Err)
	}()
	if cerr != nil {
		r.CreateErr = cerr
		return nil
	}
	for i := range rounds {
		if i > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !p.now().Before(deadline) {
				r.BudgetSpent = true
				break
			}
		}
		off := int64(i) * blockSize
		d, err := p.writeAndSync(f, off, i)
		if err != nil {
			r.Append.Err = err
			break
		}
		p.append = append(p.append, d)
		if d, err = p.writeAndSync(f, off, rounds+i); err != nil {
			r.Overwrite.Err = err
			break
		}
		p.overwrite = append(p.overwrite, d)
		if i%dirEvery == 0 {
			if err := p.dirSample(names.entry); err != nil {
				r.DirFsync.Err = err
				break
			}
		}
		r.Rounds++
	}
	// A reservation past the end, as a busy partition makes after a large
	// frame, and its giving back, as an idle one's does.
	size := int64(r.Rounds) * blockSize
	if r.FallocateErr = f.Allocate(size, fallocateBytes); r.FallocateErr == nil {
		r.Fallocate = true
		if err := f.Truncate(size); err != nil {
			r.Fallocate, r.FallocateErr = false, fmt.Errorf("give the reservation back: %w", err)
		}
	}
	return nil
}

// writeAndSync writes a block at off, its content stamped with n so that
// no two writes are alike, and times the fdatasync after it.
func (p *prober) writeAndSync(f vfs.File, off int64, n int) (time.Duration, error) {
	for i := range p.buf {
		p.buf[i] = byte(n + i + 1)
	}
	if w, err := f.WriteAt(p.buf, off); err != nil || w != len(p.buf) {
		if err == nil {
			err = io.ErrShortWrite
		}
		return 0, err
	}
	start := p.now()
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return p.now().Sub(start), nil
}

// dirSample creates an empty file and times the directory's fsync after
// it, then removes it and times that fsync: what a segment's roll and a
// retention's unlink cost.
func (p *prober) dirSample(entry string) error {
	g, err := p.fsys.OpenFile(entry, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	if err := g.Close(); err != nil {
		return err
	}
	for _, change := range []func() error{func() error { return nil }, func() error { return p.fsys.Remove(entry) }} {
		if err := change(); err != nil {
			return err
		}
		start := p.now()
		if err := p.fsys.SyncDir(p.dir); err != nil {
			return err
		}
		p.dirFsync = append(p.dirFsync, p.now().Sub(start))
	}
	return nil
}

// summarize is the percentiles of samples, with the error that ended
// them: the q-quantile is the sample at rank floor(q*(n-1)) in order (so
// of 64 samples the p99 is the second largest, not the max again).
func summarize(samples []time.Duration, err error) Latency {
	l := Latency{Samples: len(samples), Err: err}
	if len(samples) == 0 {
		return l
	}
	sorted := append([]time.Duration(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	rank := func(q float64) time.Duration {
		return sorted[int(math.Floor(q*float64(len(sorted)-1)))]
	}
	l.P50, l.P99, l.Max = rank(0.50), rank(0.99), sorted[len(sorted)-1]
	return l
}
