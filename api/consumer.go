package api

// AckRequest is an ack's body: the offsets to settle (1 to MaxAcks).
type AckRequest struct {
	Offsets []int64 `json:"offsets"`
}

// AckAnswer is an ack's answer: the lowest offset not yet acked.
type AckAnswer struct {
	Frontier int64 `json:"frontier"`
}

// ConsumerState is a partition's consumer progress.
type ConsumerState struct {
	AckedAhead    []int64 `json:"acked_ahead"` // acked above the frontier
	Frontier      int64   `json:"frontier"`    // the lowest offset not yet acked
	HighWatermark int64   `json:"high_watermark"`
	Lag           int64   `json:"lag"`    // committed and not acked
	Leased        int     `json:"leased"` // leased to queue consumers, not settled
}

// ConsumeRequest is a queue consume's body; every field is optional
// (nil: the default). Without Partition the consume leases from any of
// the topic's partitions.
type ConsumeRequest struct {
	Partition  *int `json:"partition,omitempty"`
	MaxRecords *int `json:"max_records,omitempty"` // 1 to MaxConsumeRecords; default 100
	MaxBytes   *int `json:"max_bytes,omitempty"`   // 1 to MaxFetchBytes; default DefaultFetchBytes
	LeaseMs    *int `json:"lease_ms,omitempty"`    // 1 to MaxLeaseMs; default 30 s
	WaitMs     *int `json:"wait_ms,omitempty"`     // 0 to MaxWaitMs; default 0
}

// ConsumeAnswer is a queue consume's answer: the records it leased.
type ConsumeAnswer struct {
	Records []LeasedRecord `json:"records"`
}

// LeasedRecord is a record leased to the caller until LeaseDeadlineMs: an
// ack settles it, a nack (with its LeaseID) gives it back.
type LeasedRecord struct {
	Record
	Partition       int    `json:"partition"`
	LeaseDeadlineMs int64  `json:"lease_deadline_ms"`
	LeaseID         uint64 `json:"lease_id"` // one per partition a consume leased from; never repeated for a partition
}

// NackRequest is a nack's body: records leased under LeaseID (required)
// to give back.
type NackRequest struct {
	LeaseID *uint64 `json:"lease_id"`
	Offsets []int64 `json:"offsets"`
}

// NackAnswer is a nack's answer: how many records were given back.
type NackAnswer struct {
	GivenBack int `json:"given_back"`
}

// ExtendRequest is a lease extension's body: records leased under
// LeaseID (required) to keep for LeaseMs (required, 1 to MaxLeaseMs)
// from now.
type ExtendRequest struct {
	LeaseID *uint64 `json:"lease_id"`
	Offsets []int64 `json:"offsets"`
	LeaseMs *int    `json:"lease_ms"`
}

// ExtendAnswer is a lease extension's answer: how many records were
// extended, and their new deadline (0 when none was). The deadline is
// read before the node extends them: theirs is no earlier.
type ExtendAnswer struct {
	Extended        int   `json:"extended"`
	LeaseDeadlineMs int64 `json:"lease_deadline_ms"`
}
