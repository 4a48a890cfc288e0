package api

// What one request may carry or ask for (docs/http-api.md), so no request
// can make a node allocate without bound; the node refuses a request past
// one of them, naming it. The engine's own bounds (a topic's partitions, a
// key's bytes, the retention, the acked-ahead set, the records leased per
// partition) are the engine's to state.
const (
	// MaxProduceRecords and MaxProduceBytes bound a produce request's
	// records and their bytes (413 batch_too_large).
	MaxProduceRecords = 100_000
	MaxProduceBytes   = 64 << 20

	// MaxFetchRecords bounds a fetch's and a cursor read's max_records;
	// DefaultFetchRecords is theirs when none is given.
	MaxFetchRecords     = 10_000
	DefaultFetchRecords = 1_000
	// MaxFetchBytes bounds max_bytes of a fetch, a cursor read and a
	// queue consume; DefaultFetchBytes is theirs when none is given.
	MaxFetchBytes     = 64 << 20
	DefaultFetchBytes = 1 << 20
	// MaxWaitMs bounds wait_ms, a long poll's wait.
	MaxWaitMs = 60_000

	// MaxWaitPositions bounds the partitions one topic-wide wait names:
	// a topic's partitions at most.
	MaxWaitPositions = 100_000

	// MaxAcks bounds the offsets of one ack or nack.
	MaxAcks = 100_000

	// MaxConsumeRecords bounds a queue consume's max_records, and
	// MaxLeaseMs its lease_ms (12 hours).
	MaxConsumeRecords = 10_000
	MaxLeaseMs        = 12 * 60 * 60 * 1000
)
