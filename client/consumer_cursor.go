package client

import (
	"context"
	"errors"
	"fmt"
)

// cursorRounds bounds the rounds cursorPositions asks the owners: a
// partition without an owner yet, or moving, is asked for again after a
// backoff.
const cursorRounds = 4

// cursorPositions makes the consumer's cursor on every partition it reads
// (where the topic has none of that name; made already, it is left as it
// stands) and begins each partition at the cursor's position. A node
// makes and lists a cursor on the partitions it owns: in a cluster each
// owner the description names is asked, the node the client was made
// with for a partition it serves itself.
func (k *Consumer) cursorPositions(ctx context.Context, desc Topic) error {
	if err := checkCursorName(k.opts.Cursor); err != nil {
		return err
	}
	from := Earliest
	if k.opts.Start.kind == startLatest {
		from = Latest
	}
	for round := 0; ; round++ {
		owner := partitionOwners(desc)
		nodes := map[string]bool{}
		var missing []int
		for _, st := range k.parts {
			if st.known {
				continue
			}
			missing = append(missing, st.p)
			nodes[owner[st.p]] = true
		}
		if len(missing) == 0 {
			return nil
		}
		if round == cursorRounds {
			return fmt.Errorf("narad: consumer: cursor %q has no position on partitions %v of %s: they had no owner, or moved, while it was read; try again", k.opts.Cursor, missing, k.topic)
		}
		if round > 0 {
			if err := backoff(ctx, round-1, nil); err != nil {
				return err
			}
			var err error
			if desc, err = k.c.Topic(ctx, k.topic); err != nil {
				return err
			}
		}
		for addr := range nodes {
			node, err := k.c.nodeAt(addr)
			if err != nil {
				return err
			}
			cur, _, err := k.c.createCursor(ctx, k.topic, k.opts.Cursor, from, node)
			if err != nil {
				return err
			}
			for _, pos := range cur.Partitions {
				for _, st := range k.parts {
					if st.p == pos.Partition && !st.known {
						st.known, st.next, st.committed = true, pos.Position, pos.Position
					}
				}
			}
		}
	}
}

// Commit moves the consumer's cursor, in each partition, past what Poll
// returned of it (the gaps it stepped over included): a consumer that
// commits what it has processed reads each record at least once across
// its own crash. Partitions Poll returned nothing of since the last
// Commit are not asked.
func (k *Consumer) Commit(ctx context.Context) error {
	if k.isClosed() {
		return ErrConsumerClosed
	}
	if k.opts.Cursor == "" {
		return errors.New("narad: consumer: Commit moves a cursor, and this consumer reads through none")
	}
	var errs []error
	for _, st := range k.parts {
		if st.next == st.committed {
			continue
		}
		if err := k.c.CommitCursor(ctx, k.topic, k.opts.Cursor, st.p, st.next); err != nil {
			errs = append(errs, fmt.Errorf("narad: commit of cursor %q, partition %d at %d: %w", k.opts.Cursor, st.p, st.next, err))
			continue
		}
		st.committed = st.next
	}
	return errors.Join(errs...)
}
