package partition

import (
	"sync"
	"testing"
)

// TestConcurrency_ProducersAndReaders: many producers and readers on one
// log under -race. Every produce's records land once, consecutively, at
// the offsets it was given; readers never see a record at or above the
// high watermark they read, never a record other than the one committed
// there; tail readers woken by NotifyC see every record in order.
func TestConcurrency_ProducersAndReaders(t *testing.T) {
	d := newDisk(t, 1)
	l := openLog(t, Options{FS: d, SegmentMaxBytes: 16 << 10})
	const producers, perProducer, batch = 8, 40, 3
	var wg sync.WaitGroup
	bases := make([][]int64, producers)
	errs := make(chan error, producers+4)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				seq := int64((p*perProducer + i) * batch)
				base, err := l.Produce(bg, records(9, seq, batch))
				if err != nil {
					errs <- err
					return
				}
				bases[p] = append(bases[p], base)
			}
		}()
	}
	total := int64(producers * perProducer * batch)
	var readers sync.WaitGroup
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			next := int64(0)
			for next < total {
				wake := l.NotifyC()
				res, err := l.Read(next, 50, 1<<20)
				if err != nil {
					errs <- err
					return
				}
				for _, r := range res.Records {
					if r.Offset >= res.HighWatermark || r.Offset != next {
						t.Errorf("read offset %d (expected %d) with high watermark %d", r.Offset, next, res.HighWatermark)
						return
					}
					checkRecord(t, 9, r)
					next++
				}
				if len(res.Records) == 0 {
					<-wake
				}
			}
		}()
	}
	wg.Wait()
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs, _ := readAll(t, l)
	if int64(len(recs)) != total {
		t.Fatalf("%d records, want %d", len(recs), total)
	}
	for p := range producers {
		for i, base := range bases[p] {
			seq := int64((p*perProducer + i) * batch)
			for j := range int64(batch) {
				if got := checkRecord(t, 9, recs[base+j]); got != seq+j {
					t.Fatalf("producer %d call %d: offset %d holds seq %d, want %d", p, i, base+j, got, seq+j)
				}
			}
		}
	}
	closeLog(t, l)
	if n := d.OpenFiles(); n != 0 {
		t.Fatalf("%d files open after close", n)
	}
}
