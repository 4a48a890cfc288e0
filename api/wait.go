package api

// TopicWaitRequest is a topic-wide wait's body (POST
// /v1/topics/{topic}/wait): a position in each partition the reader
// reads; the wait answers as soon as any of them has a high watermark
// elsewhere, or at WaitMs with none.
type TopicWaitRequest struct {
	Positions   []PartitionPosition `json:"positions"`
	WaitMs      *int                `json:"wait_ms,omitempty"`     // 0 to MaxWaitMs; default 0
	Incarnation string              `json:"incarnation,omitempty"` // the topic's, or the wait answers 404
}

// PartitionPosition is an offset in a partition.
type PartitionPosition struct {
	Partition int   `json:"partition"`
	Offset    int64 `json:"offset"`
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
