package client

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/narad-io/storage/api"
)

// batch is the records of one partition sent as one request, encoded as
// they are taken (the binary batch encoding, api.BatchWriter): the body
// is what goes on the wire, and the caller's slices are free once
// Produce returns.
//
// Invariants: records == len(done); size == body.Len(), the bytes it
// holds of the producer's buffer. The fields from out on are its
// sender's alone.
type batch struct {
	id      uint64 // unique in its producer, from 1
	part    int
	body    bytes.Buffer
	w       api.BatchWriter
	records int
	size    int64
	done    []func(Result) // one a record, nil where the caller gave none
	opened  time.Time      // when it took its first record: its linger runs from here

	out      *outcome // the answer to its request, or what stands for one; nil while it is awaited or unsent
	final    error    // it is not to be sent (again): settle it with this when it is the oldest
	attempts int      // sends again after nothing done (or an ambiguous failure, with RetryAmbiguous)
	hops     int      // 421 answers followed in a row
}

func newBatch(id uint64, partition, capacity int) *batch {
	b := &batch{id: id, part: partition, opened: time.Now()}
	b.body.Grow(capacity)
	b.w.Reset(&b.body)
	return b
}

// add appends a record of size bytes (recordSize) and its done.
func (b *batch) add(r Record, done func(Result), size int64) {
	b.w.Record(r.Key, r.Value) // a bytes.Buffer takes every write
	b.records++
	b.size += size
	b.done = append(b.done, done)
}

// recordSize is a record's bytes in the binary batch encoding.
func recordSize(r Record) int {
	return uvarintLen(len(r.Key)) + len(r.Key) + uvarintLen(len(r.Value)) + len(r.Value)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}
