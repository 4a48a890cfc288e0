package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Start is where a Consumer begins each partition: the zero value is
// StartEarliest.
type Start struct {
	kind    startKind
	offset  int64
	offsets map[int]int64
	at      time.Time
}

type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startOffset
	startOffsets
	startTime
)

// StartEarliest begins each partition at its first record still held.
func StartEarliest() Start { return Start{} }

// StartLatest begins each partition at its high watermark when
// NewConsumer runs: what commits after it returns is read.
func StartLatest() Start { return Start{kind: startLatest} }

// StartAtOffset begins every partition at offset, or one holding fewer
// records at its high watermark when NewConsumer runs (read to its end
// at once without Follow, long-polled there with it). StartAtOffsets is
// exact: an offset beyond its partition's high watermark is an error.
func StartAtOffset(offset int64) Start { return Start{kind: startOffset, offset: offset} }

// StartAtOffsets begins each partition at its own offset: the map names
// every partition the consumer reads, and only those.
func StartAtOffsets(offsets map[int]int64) Start {
	own := make(map[int]int64, len(offsets))
	for p, o := range offsets {
		own[p] = o
	}
	return Start{kind: startOffsets, offsets: own}
}

// StartAtTime begins each partition at its first record committed at or
// after t (its high watermark when none is yet).
func StartAtTime(t time.Time) Start { return Start{kind: startTime, at: t} }

func (s Start) String() string {
	switch s.kind {
	case startLatest:
		return "latest"
	case startOffset:
		return fmt.Sprintf("offset %d", s.offset)
	case startOffsets:
		return fmt.Sprintf("offsets %v", s.offsets)
	case startTime:
		return "time " + s.at.Format(time.RFC3339Nano)
	}
	return "earliest"
}

// check refuses a start that cannot apply to partitions.
func (s Start) check(partitions []int) error {
	switch s.kind {
	case startOffset:
		if s.offset < 0 {
			return fmt.Errorf("narad: consumer: start offset %d is negative", s.offset)
		}
	case startOffsets:
		read := map[int]bool{}
		for _, p := range partitions {
			read[p] = true
			o, ok := s.offsets[p]
			if !ok {
				return fmt.Errorf("narad: consumer: the start offsets name no offset for partition %d, which the consumer reads", p)
			}
			if o < 0 {
				return fmt.Errorf("narad: consumer: start offset %d of partition %d is negative", o, p)
			}
		}
		for p := range s.offsets {
			if !read[p] {
				return fmt.Errorf("narad: consumer: the start offsets name partition %d, which the consumer does not read", p)
			}
		}
	}
	return nil
}

// latestTime is later than any record's commit: the offset at it is a
// partition's high watermark (docs/http-api.md, "Seek by time").
var latestTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// resolve is where partition p begins; quiet is true when records
// retention deleted below it are not worth a Gap (the earliest start is
// wherever the records begin).
func (s Start) resolve(ctx context.Context, c *Client, topic string, p int) (offset int64, quiet bool, err error) {
	switch s.kind {
	case startLatest:
		offset, err = c.OffsetAt(ctx, topic, p, latestTime)
	case startOffset:
		offset, err = c.OffsetAt(ctx, topic, p, latestTime)
		offset = min(offset, s.offset)
	case startOffsets:
		offset = s.offsets[p]
	case startTime:
		offset, err = c.OffsetAt(ctx, topic, p, s.at)
	default:
		return 0, true, nil
	}
	return offset, false, err
}

// resolveStarts places each partition not placed yet (by a cursor) where
// the consumer's Start says, asking at most k.limit partitions at once;
// the first error ends it.
func (k *Consumer) resolveStarts(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	todo := make(chan *partitionRead)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range k.limit {
		wg.Go(func() {
			for st := range todo {
				next, quiet, err := k.opts.Start.resolve(ctx, k.c, k.topic, st.p)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("narad: consumer of %s, partition %d, finding its start (%v): %w", k.topic, st.p, k.opts.Start, err)
						cancel()
					}
					mu.Unlock()
					continue
				}
				st.known, st.next, st.quiet = true, next, quiet
			}
		})
	}
	for _, st := range k.parts {
		if st.known {
			continue
		}
		select {
		case todo <- st:
		case <-ctx.Done():
		}
	}
	close(todo)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}
