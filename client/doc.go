// Package client is the Go client of narad-storaged's HTTP API
// (docs/http-api.md): topics, produce (a partition's batch, or a whole
// topic through a Producer), fetch with long polls, acks and consumer
// state, queue consumes, fan-out cursors, a Consumer and a QueueConsumer
// of a whole topic, and a cluster's moves and nodes.
//
// Every call takes a context. Records travel in the binary batch encoding
// by default, so keys and values are exact bytes; Produce can send JSON
// text or base64 instead (WithEncoding). An error answer is an *Error
// carrying the API's code; errors.Is matches it against the sentinels
// (ErrTopicNotFound, ErrOffsetDeleted, ...). An answer that says the node
// did nothing, and soon may, is retried with backoff (the server's
// Retry-After, else 50 ms doubling up to 2 s), up to Options.Retries
// times: 503 busy (no open-log slot or descriptor free), 503 unassigned
// (the partition has no owner yet) and 503 moving (a move froze the
// partition) for any call, 503 commit_failed for a produce. Any other
// error answer but a 421 (below) is the caller's at once, 503
// owner_unavailable and 503 fenced among them. Connections are kept alive
// and reused.
//
// # Producer
//
// A Producer (NewProducer) sends records to a whole topic. A record with
// a key goes to KeyPartition(key, partitions): the key's 32-bit FNV-1a
// hash modulo the partition count, written out in KeyPartition's doc so
// any client places keys alike. A record without one goes to the
// partition keyless records stick to until that partition's batch is
// sent, then to the next (Kafka's sticky partitioner). The count is the
// topic's describe, taken again when a produce is answered 404 (the
// topic deleted and made again). Each partition's records are batched
// (ProducerOptions: BatchRecords, BatchBytes, Linger) and sent with up to
// MaxInFlight requests in flight, pipelined on one HTTP/1.1 connection
// a partition, which the node handles in the order written: a
// partition's records are committed, and their results (Result, to the
// callback given to Produce) come, in the order Produce took them.
//
// A request answered with nothing done (503 busy, unassigned, moving or
// commit_failed, 408 body_too_slow) is sent again after a backoff, up to
// Options.Retries times, and a 421 is followed to the owner; but only
// when no later request of its partition was committed, or may have
// been (ambiguous), meanwhile: otherwise its records fail with
// ErrNotResent rather than be committed behind later ones (after a resend
// the partition has one request in flight until one is committed). A
// failure that does not say whether the batch was committed (no answer,
// 500, 503 fenced) fails its records with ErrAmbiguous: they may be
// stored, and if they were, they may land after later batches of the
// partition (a request the node was still reading when the connection
// broke). RetryAmbiguous sends them again instead, which can store them
// twice (docs/durability.md, "The promise"). Any other refusal fails its records with the answer.
// BufferBytes bounds the records held; a Produce past it waits for room,
// or fails with ErrBufferFull (FailWhenFull). Flush and Close wait for
// every result and, when their context ends first, say what was not sent
// (UnsentError); Close then fails it. With Options.HTTPClient (the
// caller's transport, which may run two requests in either order) a
// partition has one request in flight.
//
// A queue consumer leases records with Consume (each record leased to one
// caller at a time), settles them with Ack and gives them back with Nack;
// ExtendLease keeps them leased longer for slow work, and says how many
// still were (one whose lease ran out may be another consumer's).
//
// # QueueConsumer
//
// A QueueConsumer (NewQueueConsumer) is a queue consumer of a whole
// topic: Receive hands out the records it leased, of any partition, and
// each is settled by Ack or given back by Nack (of a Message, or several
// at once, one request per partition). It is a type of its own, not a
// mode of Consumer: a Consumer reads positions (each partition in order,
// a cursor to commit), a QueueConsumer holds leases on single records,
// with no order and nothing to commit, and their options and calls have
// little in common. Delivery is at least once: a record nacked, whose
// lease ran out, or leased when its consumer or the node went away, is
// delivered again, possibly to another consumer, never to two live
// leases at once. The consumer renews the lease of each record it holds
// (received or not yet) when a third of it is left, for Lease again, up
// to MaxHold after it was leased: slow work keeps its records without
// the caller doing anything. A renewal that finds the lease gone, or
// fails up to the lease's end, marks the record LeaseLost (its work may
// be done twice; an Ack still settles it; a record lost holds no room,
// and is not returned by Receive if it had not been). At most MaxInWork
// records are held: no consume is sent while that many are unsettled and
// not lost. Close gives
// back (nacks) every record not settled, received or not, so others get
// them at once rather than at their lease's end; what a nack did not
// reach, and what a consume in flight had leased, comes back when its
// lease runs out. With UntilEmpty, Receive answers io.EOF once nothing
// is left to lease: every record it returned is settled or lost, each
// owner of the topic's partitions answered a consume that leased
// nothing, confirmed by a read of the owners begun after those answers
// that found no partition moved, and what a consume that failed after
// it was sent may have leased, or a record nacked or lost, was free
// again before those consumes were sent (Drained); so a one-time
// drain of a topic ends. io.EOF is final: the consumer leases nothing
// more and Receive answers io.EOF again. An owner whose consumes fail
// keeps it waiting, up to MaxConsumeFailures in a row: then Receive
// returns the last failure, naming the owner. OnConsumeError is told
// each failed consume that is retried, with or without UntilEmpty.
//
// It sends topic-wide consumes that long-poll (Wait, 10 s, a third of
// Lease at most, so that a record leased at the end of a poll is in time
// for its renewal): one request
// in flight, and one goroutine, per node that owns partitions of the
// topic, however many partitions there are; one goroutine finds the
// leases due and renews them, a few extensions at a time to each node
// (its owner in the last description read), each given up when the
// earliest lease it names ends, waiting for a slot included, so a node
// that hangs holds up no other's; a consume is given up 10 s after its Wait, as a failed one.
// A node's topic-wide consume leases only from the partitions it
// owns, so in a cluster the consumer covers the topic itself: it learns
// the owners from the topic's description, again every 5 s and after a
// consume fails, and consumes from each. A partition that moved is leased
// from its new owner from that node's next consume on; the leases its
// old owner gave do not move, so the new owner delivers those records
// again, and their renewals (followed by 421 to it) mark them LeaseLost.
// Renewals, acks and nacks name their partition and follow 421s. A topic
// deleted, or deleted and made again (the description's incarnation),
// ends the consumer: Receive returns ErrTopicNotFound.
// A fan-out cursor (CreateCursor) is a named reader of a topic with a
// position of its own in each partition: ReadCursor reads from it and
// moves it past what it returns (with Peek, CommitCursor moves it).
//
// A Consumer (NewConsumer) reads a whole topic, or the partitions it is
// given, each partition in offset order, from the earliest record, the
// latest, an offset (one for every partition, a shorter partition
// beginning at its end; or one each, exact) or a time. NewConsumer takes
// the latest and a time's offset of every partition before it returns: a
// record committed after is read. Poll returns a batch of one partition
// at a time, or a Gap it stepped over (records retention deleted; a
// damaged frame's, with SkipDamaged). An error reading a partition is a
// PartitionError: the partition is read again once a backoff has passed
// (the schedule of the client's retries), the others meanwhile; an error
// no read can mend (the topic or the partition gone, a request refused
// as invalid) ends the consumer, every later Poll returning it.
// Through a fan-out cursor (ConsumerOptions.Cursor) it begins at the
// cursor's positions and Commit moves the cursor past what Poll returned:
// a consumer that commits what it has processed reads every record at
// least once across its own crash. The node keeps a cursor's positions,
// not its readers: it neither refuses a second consumer of a cursor nor
// shares the partitions out between them. Consumers share a cursor by
// reading disjoint Partitions; two reading one partition each read all
// of it and commit over each other.
//
// A Consumer has at most MaxInFlight (16) requests in flight, each
// partition one fetch at a time, one goroutine and one connection a
// request. With Follow, and no more partitions than MaxInFlight, each
// partition at its high watermark holds a long poll of its own and a
// commit to any is in its answer. With more, the partitions at their
// high watermark are parked and waited on together by one topic-wide
// wait (WaitTopic) per node that owns some of them, of Wait (30 s) each:
// an idle consumer sends one request per Wait per owner, and a commit to
// an idle partition is read after the wait's answer and one fetch. Fetches
// go first: waits take the slots left, at most MaxInFlight-1; with more
// owners than that the owners' waits take turns of 250 ms. A partition
// that catches up while its owner's wait is out ends that wait, and the
// next names it. A node without the topic-wide wait (an older daemon,
// answering 404 not_found) is asked once: its idle partitions take turns,
// each long-polled 250 ms, about 4 x MaxInFlight fetches a second, a
// commit read within partitions/MaxInFlight x 250 ms. A wait's error is
// a WaitError, backed off per node as a fetch's is per partition (an
// owner that cannot be reached, or is fenced, is forgotten for every
// partition the wait named); a topic deleted or made again (the wait
// names the incarnation read) ends the consumer as a fetch's 404 does. A
// partition a wait answers ready again and again whose fetch finds
// nothing new (a node that cannot read its boundaries answers ready at
// -1) is fetched on the retry schedule, never in a loop.
//
// In a cluster, a node answers a call for a partition another node owns
// with 421 and the owner's address: the client sends the call there (up to
// 3 hops, and only over the scheme it was made with, so a redirect never
// takes the token off TLS) and sends the partition's later calls straight
// to that owner. An owner it learned that cannot be reached, or answers
// 503 fenced, is forgotten: the partition's next call asks the node the
// client was made with. Calls that name no partition in their path
// (topics, a queue consume, a cursor's create, lookup and delete) go to
// that node, which answers a consume or cursor call for the partitions it
// owns (a consume naming another node's partition is followed to its
// owner, not remembered). MovePartition, Moves and CancelMove ask for,
// list and cancel moves; Nodes, Drain and MarkLost list a cluster's live
// nodes, drain one and mark one lost. A node alone answers these with
// ErrNotACluster. CreateCursor, Cursor and DeleteCursor, and a Consumer's
// cursor, are made, read and removed on each owner the topic's
// description names, so they cover the whole topic through any node; a
// QueueConsumer consumes from each.
//
// The package depends on nothing of the engine, only on package api (the
// API's bodies, codes and binary batch codec, on the standard library
// alone): a program that talks to a daemon does not build the storage
// engine. Topic, Partition, Produced, ConsumerState, Cursor,
// CursorPosition and Owner are api's types under the names the client
// has always given them.
package client
