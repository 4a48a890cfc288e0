package bench

import (
	"context"
	"fmt"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/runtime"
	"github.com/narad-io/storage/vfs"
	"go.uber.org/zap"
)

var bg = context.Background()

// naradLog is one partition.Log on the real disk. Records go in as values
// with no key, so every engine stores the same bytes.
type naradLog struct {
	l       *partition.Log
	produce bool // Produce; else Append then CommitDurable
}

func openNaradLog(produce bool, id codec.ID) func(string, Cell) (Engine, error) {
	return func(dir string, _ Cell) (Engine, error) {
		c, err := codec.ByID(id)
		if err != nil {
			return nil, err
		}
		// The cache budget a runtime.Node gives its logs: with none, a
		// frame larger than a read's max bytes is read again for each part.
		budget := partition.NewCacheBudget(runtime.DefaultFrameCacheBytes)
		l, err := partition.Open(dir, partition.Options{FS: vfs.OS{}, Codec: c, Logger: zap.NewNop(), CacheBudget: budget})
		if err != nil {
			return nil, err
		}
		return &naradLog{l: l, produce: produce}, nil
	}
}

func asRecords(batch [][]byte) []partition.Record {
	recs := make([]partition.Record, len(batch))
	for i, v := range batch {
		recs[i].Value = v
	}
	return recs
}

func (n *naradLog) Commit(batch [][]byte) error {
	if n.produce {
		_, err := n.l.Produce(bg, asRecords(batch))
		return err
	}
	if _, err := n.l.Append(bg, asRecords(batch)); err != nil {
		return err
	}
	return n.l.CommitDurable(bg)
}

func (n *naradLog) ReadAll(fn func([]byte)) error {
	return readLog(n.l.StartOffset(), n.l.HighWatermark(), func(o int64, lend func(partition.ReadRecord) error) (partition.ReadSummary, error) {
		return n.l.ReadFunc(o, 1<<16, 8<<20, lend)
	}, fn)
}

func (n *naradLog) Close() error { return n.l.Close() }

// readLog reads offsets [from, to) with read, in reads of the size a
// catch-up consumer asks for, and hands each value to fn.
func readLog(from, to int64, read func(int64, func(partition.ReadRecord) error) (partition.ReadSummary, error), fn func([]byte)) error {
	lend := func(r partition.ReadRecord) error {
		fn(r.Value)
		return nil
	}
	for o := from; o < to; {
		sum, err := read(o, lend)
		if err != nil {
			return err
		}
		if sum.Next <= o {
			return fmt.Errorf("read at offset %d made no progress", o)
		}
		o = sum.Next
	}
	return nil
}

// naradNode is one partition of a topic on a runtime.Node: the embedding
// API a broker calls, registry, topic guard and all.
type naradNode struct{ n *runtime.Node }

const benchTopic = "bench"

func openNaradNode(dir string, _ Cell) (Engine, error) {
	n, err := runtime.New(runtime.Config{DataDir: dir, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	if _, _, err := n.CreateTopic(bg, benchTopic, 1, runtime.Retention{}); err != nil {
		n.Close()
		return nil, err
	}
	return &naradNode{n: n}, nil
}

func (n *naradNode) Commit(batch [][]byte) error {
	_, err := n.n.Produce(bg, benchTopic, 0, asRecords(batch))
	return err
}

func (n *naradNode) ReadAll(fn func([]byte)) error {
	hwm, err := n.n.HighWatermark(bg, benchTopic, 0)
	if err != nil {
		return err
	}
	return readLog(0, hwm, func(o int64, lend func(partition.ReadRecord) error) (partition.ReadSummary, error) {
		return n.n.ReadFunc(bg, benchTopic, 0, o, 1<<16, 8<<20, lend)
	}, fn)
}

func (n *naradNode) Close() error { return n.n.Close() }
