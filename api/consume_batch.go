package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// The binary queue consume answer (docs/http-api.md, "Queue consume"): the
// records a consume leased, grouped by the partition they were leased
// from, group after group with nothing around them. A consume leases from
// a partition once, under one lease id and one deadline for all it leased
// there, so each group says them once:
//
//	group:  uint32 partition, uint64 lease_id, int64 lease_deadline_ms,
//	        uint32 record count (1 to MaxConsumeRecords; big-endian),
//	        then that many records as a fetch answer's
//
// An answer that leased nothing is empty. Its records number at most
// MaxConsumeRecords in all, and the HeaderRecords header says how many:
// the body has no end marker, so an answer cut between two groups reads
// as whole but for that count.

// HeaderRecords is the binary consume answer's header that says how
// many records its body holds (a daemon older than it sends none).
const HeaderRecords = "Narad-Records"

// consumeGroupHeadSize is a group's fixed head: partition, lease id,
// deadline and record count.
const consumeGroupHeadSize = 4 + 8 + 8 + 4

// ConsumeGroupHeadSize is the bytes of a group's head, before its
// records: what a consume answer adds to its records' FetchedSize for
// each partition it leased from.
const ConsumeGroupHeadSize = consumeGroupHeadSize

// ConsumeGroup is the head of a binary consume answer's group: the
// partition its records were leased from, their lease, and how many
// follow.
type ConsumeGroup struct {
	Partition       int
	LeaseID         uint64
	LeaseDeadlineMs int64 // milliseconds since the epoch
	Records         int
}

// ConsumeBatchWriter writes a binary consume answer: a group's head
// (Group), then exactly its Records records (Record), each key and value
// straight from the caller's slice. The caller keeps to the count it
// gives; the writer does not check it. The zero value writes nowhere
// until Reset.
type ConsumeBatchWriter struct {
	bw   BatchWriter
	head [consumeGroupHeadSize]byte
}

// NewConsumeBatchWriter returns a ConsumeBatchWriter that writes to w.
func NewConsumeBatchWriter(w io.Writer) *ConsumeBatchWriter {
	cw := &ConsumeBatchWriter{}
	cw.Reset(w)
	return cw
}

// Reset makes cw write to w.
func (cw *ConsumeBatchWriter) Reset(w io.Writer) { cw.bw.Reset(w) }

// Group writes a group's head.
func (cw *ConsumeBatchWriter) Group(g ConsumeGroup) error {
	b := binary.BigEndian.AppendUint32(cw.head[:0], uint32(g.Partition))
	b = binary.BigEndian.AppendUint64(b, g.LeaseID)
	b = binary.BigEndian.AppendUint64(b, uint64(g.LeaseDeadlineMs))
	b = binary.BigEndian.AppendUint32(b, uint32(g.Records))
	_, err := cw.bw.w.Write(b)
	return err
}

// Record writes a record of the current group: FetchedSize bytes.
func (cw *ConsumeBatchWriter) Record(r BatchRecord) error { return cw.bw.Fetched(r) }

// ConsumeBatchReader reads a binary consume answer record by record, each
// with its group's head. A group's record count and partition are
// checked against their bounds (and the count against what the answer's
// groups held before) before a record of it is read; nothing is
// allocated by a count, and each key and value is read as BatchReader
// reads a fetch answer's, bounded by maxLen.
//
// An error names the group by its index and partition, and the record by
// its index in the group ("group 1 (partition 3): record 2: value: the
// body ends 10 bytes into its 64").
//
// Invariant: left records of group (the group-th, from 0) are still to
// read; total counts the records the groups read so far declared.
type ConsumeBatchReader struct {
	br    *BatchReader
	group ConsumeGroup
	index int // the current group's index; -1 before the first
	left  int
	total int
	head  [consumeGroupHeadSize]byte
}

// NewConsumeBatchReader returns a reader of r's groups and records whose
// keys and values are at most maxLen bytes each.
func NewConsumeBatchReader(r io.Reader, maxLen int) *ConsumeBatchReader {
	return &ConsumeBatchReader{br: NewBatchReader(r, maxLen), index: -1}
}

// PackSmall is BatchReader.PackSmall: small keys and values are read into
// shared blocks.
func (cr *ConsumeBatchReader) PackSmall() { cr.br.PackSmall() }

// Next reads the answer's next record and returns it with its group's
// head; io.EOF at the answer's end, after a group's last record.
func (cr *ConsumeBatchReader) Next() (ConsumeGroup, BatchRecord, error) {
	if cr.left == 0 {
		if err := cr.nextGroup(); err != nil {
			return ConsumeGroup{}, BatchRecord{}, err
		}
	}
	r, err := cr.br.Fetched()
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("record %d: the body ends before it (the group holds %d)", cr.group.Records-cr.left, cr.group.Records)
	}
	if err != nil {
		return ConsumeGroup{}, BatchRecord{}, fmt.Errorf("group %d (partition %d): %w", cr.index, cr.group.Partition, err)
	}
	cr.left--
	return cr.group, r, nil
}

// nextGroup reads a group's head, io.EOF at the answer's end.
func (cr *ConsumeBatchReader) nextGroup() error {
	if err := cr.br.start(); err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return fmt.Errorf("group %d: %w", cr.index+1, err)
	}
	cr.index++
	if got, err := io.ReadFull(cr.br.r, cr.head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("group %d: the body ends %d bytes into its %d-byte head", cr.index, got, consumeGroupHeadSize)
		}
		return fmt.Errorf("group %d: %w", cr.index, err)
	}
	p := binary.BigEndian.Uint32(cr.head[0:4])
	n := binary.BigEndian.Uint32(cr.head[20:24])
	if p > math.MaxInt32 {
		return fmt.Errorf("group %d: partition %d over %d", cr.index, p, math.MaxInt32)
	}
	if n == 0 || n > MaxConsumeRecords-uint32(cr.total) {
		return fmt.Errorf("group %d (partition %d): %d records; a group holds at least 1, and an answer at most %d in all (%d before it)", cr.index, p, n, MaxConsumeRecords, cr.total)
	}
	cr.group = ConsumeGroup{
		Partition:       int(p),
		LeaseID:         binary.BigEndian.Uint64(cr.head[4:12]),
		LeaseDeadlineMs: int64(binary.BigEndian.Uint64(cr.head[12:20])),
		Records:         int(n),
	}
	cr.left, cr.total = int(n), cr.total+int(n)
	cr.br.n = 0 // records are named by their index in the group
	return nil
}
