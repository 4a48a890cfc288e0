package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/narad-io/storage/client"
)

// BenchmarkCluster_MoveUnderProduce measures partition moves as an
// operator sees them (docs/scaling.md): three daemons, a partition of
// about 1 MiB (256 KiB segments) moved back and forth between two of
// them while a producer writes one record a call to it through the
// third, each move timed from its request to its completion in a
// replica, each started once the producer has had 20 records acked since
// the last. It reports the median and the slowest move, and how many
// took a second or more; the record count is checked at the end. The
// nodes are daemons, as an operator runs them: each a process with its
// own runtime, not three nodes sharing the benchmark's.
//
//	cd cluster/clustertest && go test -run '^$' -bench MoveUnderProduce -benchtime 20x
func BenchmarkCluster_MoveUnderProduce(b *testing.B) {
	te := startEtcd(b)
	nodes := map[string]*daemon{}
	for _, id := range []string{"a", "b", "c"} {
		nodes[id] = startDaemon(b, te, id, filepath.Join(b.TempDir(), id), "--segment-max-bytes", "262144")
	}
	watch := openMetastore(b, te, "observer")
	heard := subscribe(watch)
	via := nodes["c"].client()
	if _, _, err := via.CreateTopic(bg, "orders", 3, client.Retention{}); err != nil {
		b.Fatal(err)
	}
	owner := owners(b, watch, heard, "orders", 3)
	p := slices.IndexFunc(owner, func(o string) bool { return o != "c" }) // moved between a and b
	if p < 0 {
		b.Fatal("fixture: c owns every partition")
	}
	from, to := owner[p], "a"
	if from == "a" {
		to = "b"
	}
	const fill = 1024 // records of 1 KiB
	for range fill / 128 {
		recs := make([]client.Record, 128)
		for i := range recs {
			recs[i] = client.Record{Value: bytes.Repeat([]byte{'x'}, 1024)}
		}
		if _, err := via.Produce(bg, "orders", p, recs); err != nil {
			b.Fatal(err)
		}
	}

	var acked atomic.Int64
	stop, produced := make(chan struct{}), make(chan error, 1)
	progress := make(chan struct{}, 1) // a record was acked
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				produced <- nil
				return
			default:
			}
			_, err := via.Produce(bg, "orders", p, []client.Record{{Value: fmt.Appendf(nil, "%0100d", i)}})
			if errors.Is(err, client.ErrMoving) {
				continue // nothing was done: sent again
			}
			if err != nil {
				produced <- err
				return
			}
			acked.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
	}()
	var took []time.Duration
	dropped := map[string]int{}
	for b.Loop() {
		// Each move starts while the producer writes: once it has had
		// records acked since the last move (its calls wait out the
		// moving partition's Retry-After).
		for next := acked.Load() + 20; acked.Load() < next; {
			select {
			case <-progress:
			case err := <-produced:
				b.Fatalf("produce during the moves: %v", err)
			}
		}
		start := time.Now()
		if _, err := watch.RequestMove(bg, "orders", p, to); err != nil {
			b.Fatal(err)
		}
		heard.waitFor(b, "the move to complete", func() bool {
			o, _ := watch.Owner("orders", p)
			return o == to && len(watch.Moves()) == 0
		})
		took = append(took, time.Since(start))
		// The next move goes back to the old owner: once it dropped its copy.
		dropped[from]++
		if !nodes[from].waitLogCount("dropped this node's copy of a partition another node owns", dropped[from]) {
			b.Fatalf("node %s never dropped its copy", from)
		}
		from, to = to, from
	}
	close(stop)
	if err := <-produced; err != nil {
		b.Fatalf("produce during the moves: %v", err)
	}
	want := fill + acked.Load()
	got, err := via.Fetch(bg, "orders", p, want-1, client.FetchOptions{})
	if err != nil || len(got.Records) != 1 || got.HighWatermark != want {
		b.Fatalf("after the moves: %d records from %d, high watermark %d, %v; want %d", len(got.Records), want-1, got.HighWatermark, err, want)
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	slow := 0
	for _, d := range took {
		if d >= time.Second {
			slow++
		}
	}
	b.ReportMetric(float64(sorted[len(sorted)/2].Milliseconds()), "median-ms/move")
	b.ReportMetric(float64(sorted[len(sorted)-1].Milliseconds()), "max-ms/move")
	b.ReportMetric(float64(slow), "moves≥1s")
	b.Logf("%d moves under produce (%d records acked meanwhile), each: %v", len(took), acked.Load(), took)
}
