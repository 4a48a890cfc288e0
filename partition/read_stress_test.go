package partition

import (
	"errors"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/vfs/sim"
)

// TestRead_HeldRecordsNeverChange: producers whose commits fail now and
// then (a short write: the actor truncates back to the high watermark)
// and readers with small, varied limits that drop the cache now and then,
// with both codecs. Every record a reader was served is kept, as served,
// and at the end must be byte for byte the record the log holds at its
// offset: no buffer a record points into is written again, and nothing
// above a view's high watermark or cut by a truncate is served.
func TestRead_HeldRecordsNeverChange(t *testing.T) {
	for _, id := range []codec.ID{codec.None, codec.Zstd} {
		d := newDisk(t, 1)
		c, _ := codec.ByID(id)
		opts := Options{FS: d, SegmentMaxBytes: 64 << 10, Codec: c}
		l := openLog(t, opts)
		var produced sync.WaitGroup
		var stop sync.Once
		done := make(chan struct{})
		produced.Add(1)
		go func() {
			defer produced.Done()
			defer stop.Do(func() { close(done) })
			seq := int64(0)
			for i := range 400 {
				if i%5 == 4 {
					d.Inject(sim.Fault{Op: sim.OpWrite, Path: testDir + "/*.log", Nth: 1, Short: 100, Err: syscall.ENOSPC})
				}
				n := 1 + i%7
				if _, err := l.Produce(bg, records(3, seq, n)); err != nil && !errors.Is(err, ErrNoSpace) {
					t.Errorf("produce: %v", err)
					return
				}
				seq += int64(n)
			}
		}()
		var mu sync.Mutex
		var kept []ReadRecord
		var readers sync.WaitGroup
		for g := range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				next := int64(0)
				for {
					select {
					case <-done:
						if next >= l.HighWatermark() {
							return
						}
					default:
					}
					if rng.IntN(10) == 0 {
						l.cache.forgetFrom(0)
					}
					if rng.IntN(10) == 0 {
						next = rng.Int64N(l.HighWatermark() + 1)
					}
					res, err := l.Read(next, 1+rng.IntN(40), 1+rng.IntN(3000))
					if err != nil {
						t.Errorf("read at %d: %v", next, err)
						return
					}
					for _, r := range res.Records {
						if r.Offset >= res.HighWatermark {
							t.Errorf("offset %d served at high watermark %d", r.Offset, res.HighWatermark)
						}
						checkRecord(t, 3, r)
					}
					mu.Lock()
					kept = append(kept, res.Records...)
					mu.Unlock()
					next = res.Next
				}
			}()
		}
		produced.Wait()
		readers.Wait()
		all, gaps := readAll(t, l)
		if len(gaps) > 0 {
			t.Fatalf("gaps %v", gaps)
		}
		for _, r := range kept {
			want := all[r.Offset]
			if string(r.Key) != string(want.Key) || string(r.Value) != string(want.Value) {
				t.Fatalf("codec %d: offset %d held key %q value %x..., the log holds key %q", id, r.Offset, r.Key, r.Value[:8], want.Key)
			}
		}
		t.Logf("codec %d: %d records held, %d in the log", id, len(kept), len(all))
		closeLog(t, l)
	}
}
