package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// TopicWaitRequest is a topic-wide wait's body (POST
// /v1/topics/{topic}/wait): a position in each partition the reader
// reads; the wait answers as soon as any of them has a high watermark
// elsewhere, or at WaitMs with none.
type TopicWaitRequest struct {
	Positions   []PartitionPosition `json:"positions"`
	WaitMs      *int                `json:"wait_ms,omitempty"`     // 0 to MaxWaitMs; default 0
	Incarnation string              `json:"incarnation,omitempty"` // the topic's, or the wait answers 404
}

// PartitionPosition is an offset in a partition. Both fields must be
// given, and no other.
type PartitionPosition struct {
	Partition int   `json:"partition"`
	Offset    int64 `json:"offset"`
}

// UnmarshalJSON reads a position exactly: a misspelt or missing field is
// an error, never a position at partition 0 or offset 0.
func (p *PartitionPosition) UnmarshalJSON(b []byte) error {
	var exact struct {
		Partition *int   `json:"partition"`
		Offset    *int64 `json:"offset"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&exact); err != nil {
		return fmt.Errorf("a position: %w", err)
	}
	if exact.Partition == nil || exact.Offset == nil {
		return errors.New(`a position needs both "partition" and "offset"`)
	}
	p.Partition, p.Offset = *exact.Partition, *exact.Offset
	return nil
}

// TopicWaitAnswer is a topic-wide wait's answer: the partitions of the
// request whose high watermark is not their position, in partition order;
// the ones another node owns (not waited on: ask each owner for its own);
// and the topic's incarnation.
type TopicWaitAnswer struct {
	Ready       []PartitionHighWatermark `json:"ready"`
	NotHere     []int                    `json:"not_here"`
	Incarnation string                   `json:"incarnation"`
}

// PartitionHighWatermark is a partition's high watermark.
type PartitionHighWatermark struct {
	Partition     int   `json:"partition"`
	HighWatermark int64 `json:"high_watermark"`
}
