package campaign

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/internal/crashtest"
	"github.com/narad-io/storage/internal/fsys"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
)

// CrashStates runs the reference workload on a fresh disk with the crash
// explorer on and returns every distinct crash state, each with the model
// as it stood there. It must run inside a synctest bubble (the workload
// advances fake time).
func CrashStates(ctx context.Context, c codec.ID, seed uint64) ([]crashtest.Image[Model], int, error) {
	d := fsys.NewDisk(seed)
	if err := d.MkdirAll(DataDir); err != nil {
		return nil, 0, err
	}
	if err := d.SyncDir("/"); err != nil {
		return nil, 0, err
	}
	var mu sync.Mutex
	m := &Model{Consumed: map[int64]bool{}}
	explore := crashtest.NewExplorer(d, func() Model { mu.Lock(); defer mu.Unlock(); return m.clone() })
	var runErr error
	explore.Run(func() {
		runErr = Run(ctx, d, c, seed, m, func(f func()) { mu.Lock(); defer mu.Unlock(); f() })
	})
	return explore.Images(), explore.Calls(), runErr
}

// CheckCrashState starts a fresh node on a crash image and checks it
// against the model (fault-model invariants):
//   - I2: the node starts, and a second start on the same image reaches
//     the same boundaries;
//   - I1: every record served is the one produced at its offset;
//   - I5: the high watermark is not above anything written;
//   - I4: every offset of an honest commit, from the start offset up, is
//     served (not asked of an image whose torn sectors hold garbage);
//   - I6: the next commit lands exactly at the high watermark;
//   - I9: the consumer frontier never passes an offset whose ack did not
//     return.
//
// It returns the first violation, naming the image.
func CheckCrashState(ctx context.Context, img crashtest.Image[Model], c codec.ID, seed uint64) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", img.Label, fmt.Sprintf(format, args...))
	}
	var bounds [2][2]int64
	for round := range 2 {
		n, err := StartNode(ctx, img.Disk, c)
		if err != nil {
			return fail("start %d: %v (I2)", round+1, err)
		}
		l, err := n.Log(ctx, Topic, 0)
		if err != nil {
			n.Close()
			if errors.Is(err, runtime.ErrTopicNotFound) && img.Model.Committed == 0 {
				return nil // the topic's create did not survive: nothing was promised yet
			}
			return fail("open: %v (I2)", err)
		}
		start, hwm := l.StartOffset(), l.HighWatermark()
		bounds[round] = [2]int64{start, hwm}
		if round == 1 {
			if bounds[0] != bounds[1] {
				n.Close()
				return fail("a second start gives [%d, %d), the first [%d, %d) (I2)", start, hwm, bounds[0][0], bounds[0][1])
			}
			base, err := n.Produce(ctx, Topic, 0, []partition.Record{{Value: Value(seed, hwm)}})
			n.Close()
			if err != nil || base != hwm {
				return fail("the next commit lands at %d, %v; the high watermark was %d (I6)", base, err, hwm)
			}
			continue
		}
		if hwm > img.Model.Written {
			n.Close()
			return fail("high watermark %d above anything written, %d (I5)", hwm, img.Model.Written)
		}
		served := start
		for offset := start; offset < hwm; {
			res, err := n.Read(ctx, Topic, 0, offset, 1000, 8<<20)
			if err != nil {
				n.Close()
				return fail("read at %d of [%d, %d): %v (I4)", offset, start, hwm, err)
			}
			for _, r := range res.Records {
				if string(r.Value) != string(Value(seed, r.Offset)) {
					n.Close()
					return fail("offset %d holds bytes never produced there (I1)", r.Offset)
				}
				served = r.Offset + 1
			}
			offset = res.Next
		}
		if served < img.Model.Committed && !img.Garbage {
			n.Close()
			return fail("served up to %d, commits up to %d returned (I4)", served, img.Model.Committed)
		}
		st, err := n.ConsumerState(ctx, Topic, 0)
		if err != nil {
			n.Close()
			return fail("consumer state: %v", err)
		}
		for o := int64(0); o < st.Frontier; o++ {
			if !img.Model.Consumed[o] {
				n.Close()
				return fail("consumer frontier %d passes unacked offset %d (I9)", st.Frontier, o)
			}
		}
		if err := n.Close(); err != nil {
			return fail("close: %v", err)
		}
	}
	return nil
}
