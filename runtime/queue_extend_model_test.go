package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/narad-io/storage/supervisor"
)

// A reference model of one partition's leases for the randomized tests
// of lease extension (docs/design.md, "Queue consume"): a record is free,
// leased under one id until a deadline, or acked. A lease is over at its
// deadline (given back then, unless settled), and a nack or an extension
// acts only on a lease still running under its id.
type leaseModel struct {
	acked     map[int64]bool
	delivered map[int64]bool
	leases    map[int64]lease // unexpired leases only
	ids       []uint64        // every id a consume gave
}

func newLeaseModel() *leaseModel {
	return &leaseModel{acked: map[int64]bool{}, delivered: map[int64]bool{}, leases: map[int64]lease{}}
}

// expire ends every lease whose deadline is not after now.
func (m *leaseModel) expire(now time.Time) {
	for o, l := range m.leases {
		if !now.Before(l.deadline) {
			delete(m.leases, o)
		}
	}
}

// free lists the records a consume may lease now, lowest first.
func (m *leaseModel) free(records int64) []int64 {
	var out []int64
	for o := range records {
		if _, leased := m.leases[o]; !leased && !m.acked[o] {
			out = append(out, o)
		}
	}
	return out
}

// holds reports that o is leased under id now.
func (m *leaseModel) holds(o int64, id uint64) bool {
	l, ok := m.leases[o]
	return ok && l.id == id
}

// checkQueue compares the queue of jobs/0 with the model once every
// timer due has run: its leases are the model's running ones, with their
// ids and deadlines (an expiry late or early shows here), and what it
// holds for redelivery is every record delivered, not acked and not
// leased.
func checkQueue(t *testing.T, n *testNode, m *leaseModel, records int64, step string) {
	t.Helper()
	q := n.queues.lookup(supervisor.Key{Topic: "jobs", Partition: 0})
	if q == nil {
		if len(m.leases) > 0 {
			t.Fatalf("%s: no queue, model leases %v", step, m.leases)
		}
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for o := range records {
		want, wantLeased := m.leases[o]
		got, leased := q.leased[o]
		if wantLeased != leased || (leased && (got.id != want.id || !got.deadline.Equal(want.deadline))) {
			t.Fatalf("%s: offset %d leased %v %+v, model %v %+v", step, o, leased, got, wantLeased, want)
		}
		if m.acked[o] {
			continue
		}
		inRedeliver := slices.Contains(q.redeliver, o)
		if wantRedeliver := m.delivered[o] && !wantLeased; inRedeliver != wantRedeliver {
			t.Fatalf("%s: offset %d in redeliver %v, model %v (redeliver %v)", step, o, inRedeliver, wantRedeliver, q.redeliver)
		}
	}
}

// TestExtend_RandomOrdersMatchTheLeaseModel: random sequences of
// consume, ack, nack, extend (under the right id, an old one or a made-up
// one, longer or shorter) and the clock moving, over a few records: each
// consume leases exactly the lowest free records (so no record is leased
// under two running leases), each nack and extension acts on exactly the
// records leased under its id and not expired, and after every step the
// queue's leases and redeliveries are the model's: a record is given back
// exactly when its deadline, as last extended, passes unsettled.
func TestExtend_RandomOrdersMatchTheLeaseModel(t *testing.T) {
	const records, steps = 4, 80
	for seed := range uint64(25) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(seed, 41))
				n := startNode(t, nil, Config{})
				makeTopic(t, n, "jobs", 1, records)
				m := newLeaseModel()
				anID := func() uint64 {
					if len(m.ids) == 0 || rnd.IntN(5) == 0 {
						return rnd.Uint64N(1 << 40)
					}
					return m.ids[rnd.IntN(len(m.ids))]
				}
				someOffsets := func() []int64 {
					var out []int64
					for o := range int64(records + 1) { // records itself: never leased
						if rnd.IntN(2) == 0 {
							out = append(out, o)
						}
					}
					return append(out, rnd.Int64N(records))
				}
				seconds := func(lo, hi int) time.Duration {
					return time.Duration(lo*2+rnd.IntN((hi-lo)*2+1)) * time.Second / 2
				}
				for i := range steps {
					now := time.Now()
					var step string
					switch rnd.IntN(5) {
					case 0:
						k, leaseFor := 1+rnd.IntN(3), seconds(1, 5)
						step = fmt.Sprintf("step %d: consume %d for %v", i, k, leaseFor)
						got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: k, Lease: leaseFor})
						if err != nil {
							t.Fatalf("%s: %v", step, err)
						}
						free := m.free(records)
						want := free[:min(k, len(free))]
						var offsets []int64
						for _, r := range got {
							offsets = append(offsets, r.Offset)
							m.leases[r.Offset] = lease{deadline: now.Add(leaseFor), id: r.LeaseID}
							m.delivered[r.Offset] = true
						}
						if !slices.Equal(offsets, want) {
							t.Fatalf("%s: leased %v, model's free %v", step, offsets, free)
						}
						if len(got) > 0 {
							m.ids = append(m.ids, got[0].LeaseID)
						}
					case 1:
						o := rnd.Int64N(records)
						step = fmt.Sprintf("step %d: ack %d", i, o)
						if _, err := n.Ack(bg, "jobs", 0, o); err != nil {
							t.Fatalf("%s: %v", step, err)
						}
						m.acked[o] = true
						delete(m.leases, o)
					case 2:
						id, offsets := anID(), someOffsets()
						step = fmt.Sprintf("step %d: nack %v under %d", i, offsets, id)
						given, err := n.Nack(bg, "jobs", 0, id, offsets...)
						want := 0
						for _, o := range offsets {
							if m.holds(o, id) {
								delete(m.leases, o)
								want++
							}
						}
						if err != nil || given != want {
							t.Fatalf("%s: %d given back (%v), model %d", step, given, err, want)
						}
					case 3:
						id, offsets, leaseFor := anID(), someOffsets(), seconds(1, 5)
						step = fmt.Sprintf("step %d: extend %v under %d by %v", i, offsets, id, leaseFor)
						extended, err := n.ExtendLease(bg, "jobs", 0, id, leaseFor, offsets...)
						want, seen := 0, map[int64]bool{}
						for _, o := range offsets {
							if !seen[o] && m.holds(o, id) {
								m.leases[o] = lease{deadline: now.Add(leaseFor), id: id}
								want++
							}
							seen[o] = true
						}
						if err != nil || extended != want {
							t.Fatalf("%s: %d extended (%v), model %d", step, extended, err, want)
						}
					case 4:
						d := seconds(0, 3)
						step = fmt.Sprintf("step %d: %v pass", i, d)
						<-time.After(d)
						synctest.Wait() // every expiry due has run
						m.expire(time.Now())
					}
					checkQueue(t, n, m, records, step)
				}
			})
		})
	}
}

// TestExtend_ConcurrentSettlesAndExpiriesKeepOneLeasePerRecord: consumers
// leasing, extending, nacking and acking the same records at once, with
// leases running out among them (run it with -race): no record is ever
// leased under two running leases, an extension or a nack of a lease still
// running acts and one of a lease run out does not, and at the end every
// record not acked is free to lease again.
func TestExtend_ConcurrentSettlesAndExpiriesKeepOneLeasePerRecord(t *testing.T) {
	const records, workers, steps = 16, 4, 100
	synctest.Test(t, func(t *testing.T) {
		n := startNode(t, nil, Config{})
		makeTopic(t, n, "jobs", 1, records)
		type holding struct {
			id       uint64
			deadline time.Time
			worker   int
		}
		var mu sync.Mutex
		held := map[int64]holding{}
		acked := map[int64]bool{}
		var extended, refused int // extensions of leases running, and run out
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(w), 7))
				var mine []LeasedRecord
				for range steps {
					before := time.Now()
					switch {
					case len(mine) == 0 || rnd.IntN(4) == 0:
						lease := time.Duration(1+rnd.IntN(3)) * time.Second
						got, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: 2, Lease: lease})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, r := range got {
							if h, ok := held[r.Offset]; ok && before.Before(h.deadline) {
								t.Errorf("offset %d leased to worker %d while worker %d's lease runs to %v", r.Offset, w, h.worker, h.deadline)
							}
							if acked[r.Offset] {
								t.Errorf("offset %d leased after its ack", r.Offset)
							}
							held[r.Offset] = holding{r.LeaseID, r.LeaseDeadline, w}
						}
						mu.Unlock()
						mine = append(mine, got...)
					case rnd.IntN(3) == 0:
						<-time.After(time.Duration(rnd.IntN(7)) * time.Second / 2)
					default:
						i := rnd.IntN(len(mine))
						r := mine[i]
						mu.Lock()
						running := held[r.Offset].id == r.LeaseID && before.Before(held[r.Offset].deadline)
						// At its deadline's instant a lease is over, and its
						// timer may not have given it back yet: an extension
						// passes it over (it checks the deadline), a nack may
						// give it back (the same as the timer would).
						atDeadline := held[r.Offset].id == r.LeaseID && before.Equal(held[r.Offset].deadline)
						mu.Unlock()
						op := rnd.IntN(3)
						if op == 2 && !running {
							op = 0 // an ack of a lease run out would settle another's record
						}
						var got int
						var err error
						switch op {
						case 0:
							lease := time.Duration(1+rnd.IntN(3)) * time.Second
							got, err = n.ExtendLease(bg, "jobs", 0, r.LeaseID, lease, r.Offset)
							mu.Lock()
							if got == 1 {
								held[r.Offset] = holding{r.LeaseID, before.Add(lease), w}
								extended++
							} else {
								refused++
							}
							mu.Unlock()
						case 1:
							// Under mu: a consume that leases the record
							// once it is given back records it after.
							mu.Lock()
							if got, err = n.Nack(bg, "jobs", 0, r.LeaseID, r.Offset); got == 1 {
								delete(held, r.Offset)
							}
							mu.Unlock()
						case 2:
							mu.Lock()
							acked[r.Offset] = true
							mu.Unlock()
							_, err = n.Ack(bg, "jobs", 0, r.Offset)
							got = 1
						}
						if err != nil {
							t.Error(err)
							return
						}
						want := 0
						if running {
							want = 1
						}
						if time.Now().Equal(before) && got != want && !(op == 1 && atDeadline) {
							t.Errorf("worker %d: op %d on offset %d (running %v) acted on %d", w, op, r.Offset, running, got)
						}
						if op != 0 || got == 0 {
							mine = slices.Delete(mine, i, i+1)
						}
					}
				}
			}()
		}
		wg.Wait()
		if extended == 0 || refused == 0 {
			t.Errorf("%d extensions of running leases and %d of leases run out: the run tried too little", extended, refused)
		}
		<-time.After(MaxLease)
		rest, err := n.Consume(bg, "jobs", ConsumeOptions{Partition: 0, MaxRecords: records})
		if err != nil {
			t.Fatal(err)
		}
		var got, want []int64
		for _, r := range rest {
			got = append(got, r.Offset)
		}
		for o := range int64(records) {
			if !acked[o] {
				want = append(want, o)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("after every lease ran out: leased %v, want every record not acked %v", got, want)
		}
	})
}
