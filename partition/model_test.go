package partition

import (
	"errors"
	"syscall"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs/sim"
	"pgregory.net/rapid"
)

// logModel is what a log must hold: the sequence numbers at each committed
// offset, and those appended and not yet committed.
type logModel struct {
	committed  []int64
	pending    []int64
	appendLost bool // a failed commit discarded appended records
}

// TestModel_RandomOperations drives random sequences of append, commit,
// produce, read, failed commits, close and reopen, and power losses in
// every mode against logModel, checking after every step that each
// committed record reads back byte for byte at its offset, that nothing
// at or above the high watermark is visible, and that offsets never go
// backwards.
func TestModel_RandomOperations(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cd, _ := codec.ByID(codec.ID(rapid.IntRange(0, 1).Draw(rt, "codec")))
		d := newDisk(t, rapid.Uint64().Draw(rt, "diskSeed"))
		opts := Options{FS: d, SegmentMaxBytes: int64(rapid.SampledFrom([]int{1 << 10, 4 << 10, 64 << 10}).Draw(rt, "segment")), Codec: cd}
		opts.flush = defaultFlushPolicy
		opts.flush.drainRecords = rapid.IntRange(1, 8).Draw(rt, "drainRecords")
		l, err := Open(testDir, opts)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { l.Close() }()
		var m logModel
		seq := int64(0)
		next := func(n int) []Record {
			r := records(5, seq, n)
			seq += int64(n)
			return r
		}
		seqs := func(rs []Record) []int64 {
			out := make([]int64, len(rs))
			for i, r := range rs {
				out[i], _ = seqOf(r.Value)
			}
			return out
		}
		check := func(where string) {
			hwm := l.HighWatermark()
			if hwm != int64(len(m.committed)) {
				rt.Fatalf("%s: high watermark %d, model %d", where, hwm, len(m.committed))
			}
			if _, err := l.Read(hwm+1, 10, 1<<20); !errors.Is(err, ErrBeyondHighWatermark) {
				rt.Fatalf("%s: read past the high watermark: %v", where, err)
			}
			recs, gaps := readAll(t, l)
			if len(gaps) > 0 || int64(len(recs)) != hwm {
				rt.Fatalf("%s: %d records and gaps %v below high watermark %d", where, len(recs), gaps, hwm)
			}
			for i, r := range recs {
				if s := checkRecord(t, 5, r); s != m.committed[i] || r.Offset != int64(i) {
					rt.Fatalf("%s: offset %d holds seq %d, model %d", where, r.Offset, s, m.committed[i])
				}
			}
		}
		reopen := func(fs *sim.Disk) {
			opts.FS = fs
			var err error
			if l, err = Open(testDir, opts); err != nil {
				rt.Fatalf("reopen: %v", err)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"produce": func(rt *rapid.T) {
				rs := next(rapid.IntRange(1, 5).Draw(rt, "n"))
				base, err := l.Produce(bg, rs)
				if err != nil {
					rt.Fatal(err)
				}
				if want := int64(len(m.committed) + len(m.pending)); base != want {
					rt.Fatalf("produce base %d, want %d", base, want)
				}
				m.committed = append(append(m.committed, m.pending...), seqs(rs)...)
				m.pending = nil
			},
			"append": func(rt *rapid.T) {
				rs := next(rapid.IntRange(1, 5).Draw(rt, "n"))
				base, err := l.Append(bg, rs)
				if err != nil {
					rt.Fatal(err)
				}
				if want := int64(len(m.committed) + len(m.pending)); base != want {
					rt.Fatalf("append base %d, want %d", base, want)
				}
				m.pending = append(m.pending, seqs(rs)...)
			},
			"commit": func(rt *rapid.T) {
				err := l.CommitDurable(bg)
				if m.appendLost {
					if !errors.Is(err, ErrCommitFailed) {
						rt.Fatalf("commit after discarded appends: %v", err)
					}
					m.appendLost, m.pending = false, nil
					return
				}
				if err != nil {
					rt.Fatal(err)
				}
				m.committed = append(m.committed, m.pending...)
				m.pending = nil
			},
			"failedProduce": func(rt *rapid.T) {
				in := d.Inject(sim.Fault{Op: sim.OpWrite, Path: testDir + "/*.log", Nth: 1, Sticky: true, Err: syscall.EIO})
				_, err := l.Produce(bg, next(2))
				in.Remove()
				if !errors.Is(err, ErrCommitFailed) {
					rt.Fatalf("produce with a failing write: %v", err)
				}
				if len(m.pending) > 0 {
					m.appendLost = true
				}
				m.pending = nil
			},
			"closeReopen": func(rt *rapid.T) {
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				reopen(d)
				m.pending, m.appendLost = nil, false
			},
			"powerLoss": func(rt *rapid.T) {
				plan := sim.CrashPlan{
					Data:        sim.DataLoss(rapid.IntRange(0, 2).Draw(rt, "mode")),
					Seed:        rapid.Uint64().Draw(rt, "seed"),
					KeepNameOps: rapid.IntRange(-1, 3).Draw(rt, "nameOps"),
				}
				crashed := d.Crash(plan)
				l.Close()
				d = crashed
				reopen(d)
				// Records drained but never committed may come back as a
				// hidden tail exposed: a prefix of pending, never more.
				extra := l.HighWatermark() - int64(len(m.committed))
				if extra < 0 || extra > int64(len(m.pending)) {
					rt.Fatalf("power loss: high watermark %d, committed %d, pending %d", l.HighWatermark(), len(m.committed), len(m.pending))
				}
				m.committed = append(m.committed, m.pending[:extra]...)
				m.pending, m.appendLost = nil, false
			},
			"": func(rt *rapid.T) { check("after step") },
		})
	})
}
