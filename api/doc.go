// Package api is narad-storaged's HTTP API as Go: the contract that
// docs/http-api.md states in prose, as the types, constants and codec both
// ends use. The server's handlers (package server) read and answer these
// bodies and the Go client (package client) sends and reads them, so a
// change of the format has one home.
//
// It holds:
//
//   - the JSON bodies, named as the docs name them: a topic's description
//     (TopicRequest, TopicDescription, PartitionDescription, TopicList),
//     produce (ProduceRequest, ProduceAnswer), fetch (FetchAnswer and its
//     Records), seek by time (OffsetAnswer), acks and the consumer state
//     (AckRequest, AckAnswer, ConsumerState), the queue consume
//     (ConsumeRequest, ConsumeAnswer, LeasedRecord, NackRequest,
//     NackAnswer) and fan-out cursors (CreateCursorRequest, Cursor,
//     CursorPosition, CommitCursorRequest, CursorReadAnswer);
//   - the error body (ErrorBody, with its optional start_offset,
//     next_offset and owner) and every error code (CodeInvalidBody, ...);
//   - the bounds a request is held to (MaxFetchRecords, MaxAcks, ...);
//   - the binary batch encoding (BatchMediaType) of a produce body and
//     of a fetch answer: one writer (BatchWriter) and one reader
//     (BatchReader), which bounds every length before it allocates and is
//     fuzzed, and the headers a binary answer carries (HeaderNextOffset,
//     ...); and the binary queue consume answer, records grouped by the
//     partition and lease they were leased under (ConsumeBatchWriter,
//     ConsumeBatchReader, consume_batch.go), in the same media type.
//
// An answer's fields stand in the order the server writes them. A records
// answer (a fetch's, a cursor read's, a queue consume's) is streamed by
// the server as it reads the records, not encoded from these types; its
// tests hold it to them byte for byte.
//
// The package imports only the standard library (a test keeps it so): a
// program that speaks the API builds nothing of the engine.
package api
