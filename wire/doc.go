// Package wire owns every byte layout the storage engine puts on disk: the
// frame header and its payload framing, the keyed envelope, the names of
// segment files and directories, the 8-byte hwm and consumer.offset files,
// the consumer.ahead slots, a fan-out cursor's slots, the incarnation
// marker, a topic's dictionary files and a sealed segment's time index.
//
// Everything here is a pure function over byte slices: no I/O, no state, no
// dependency outside the standard library. Every length read from disk is
// bounded by the bytes actually present before it is used, and every
// decoder is fuzzed. The layouts and the exported constants below are part
// of the on-disk format: changing one makes existing data unreadable.
//
// Errors wrap one of the sentinels in errors.go: ErrTruncated (bytes
// missing: a torn or short write), ErrCorrupt (bytes present but wrong),
// ErrTooLarge and ErrInvalidInput (an encoder refusing its input),
// ErrBadName (not a name of the format) and ErrForeignIncarnation.
//
// # Frame
//
// A segment is a run of frames. All integers are big-endian.
//
//	offset  size  field         rule
//	0       2     magic         0xCA 0xFE (FrameMagic)
//	2       1     flags         bits 0-2 codec id (0 none, 1 zstd, 2 zstd-dict); bits 3-7 zero
//	3       4     recordCount   int32, >= 1, <= uncompressed/4
//	7       8     baseOffset    int64, >= 0, offset of the first record;
//	                            baseOffset+recordCount does not overflow
//	15      4     uncompressed  payload size before the codec, <= MaxFrameBytes
//	19      4     compressed    stored payload size, >= 1, 27+compressed <= MaxFrameBytes;
//	                            equal to uncompressed for codec none
//	23      4     crc32c        Castagnoli over header[2:23] + stored payload
//	27      n     payload       the stored (codec-encoded) payload, n = compressed
//
// The CRC leaves out the magic so a recovery scanner can search for 0xCAFE
// cheaply when it resyncs. ParseFrameHeader validates the header alone, so a
// reader checks FrameLen against the bytes left in the file before it
// allocates anything (MaxFrameBytes bounds it either way). CheckFrame then
// tells a short or torn frame (ErrTruncated) from a corrupt one
// (ErrCorrupt) and a valid one.
//
// A valid frame can still be in the wrong place (a misdirected or stale
// write passes its CRC). The caller checks position: the first frame of a
// segment must have the segment's name as its baseOffset, and each next
// frame must start at the previous frame's EndOffset.
//
// # Payload
//
// The uncompressed payload is recordCount records, each a length prefix and
// the record's bytes, and nothing else:
//
//	offset  size  field
//	0       4     len     uint32, <= bytes left in the payload
//	4       len   record  a keyed envelope
//	...           repeated recordCount times; the last record ends the payload
//
// # Keyed envelope
//
// Every record is a keyed envelope:
//
//	offset  size  field              rule
//	0       1     version            0x02 (EnvelopeVersion)
//	1       k     keyLen             uvarint, minimal encoding, <= MaxKeyBytes
//	1+k     n     key                keyLen bytes; empty means no key
//	1+k+n   8     committedAtUnixMs  int64, raised in place at append
//	9+k+n   rest  payload            the rest of the record
//
// An envelope only ever sits inside a CRC-checked frame, so a short one is
// corruption (ErrCorrupt), not a torn write. A non-minimal uvarint (a
// trailing 0x00 group) is rejected: no writer produces one, and rejecting it
// gives every envelope exactly one encoding.
//
// # Names
//
//	topics/                                  TopicsDirName
//	topics/<topic>/incarnation               IncarnationFileName
//	topics/<topic>/incarnation.copy          IncarnationCopyFileName
//	topics/<topic>/dictionary.<10 digits>    DictionaryFileName: a zstd dictionary, by id
//	topics/<topic>/pNNNNN/                   PartitionDirName: "p" + 5 digits, 0..99999
//	topics/<topic>/pNNNNN/<20 digits>.log    SegmentFileName: first offset, zero-padded
//	topics/<topic>/pNNNNN/hwm                HWMFileName
//	topics/<topic>/pNNNNN/consumer.offset    ConsumerOffsetFileName
//	topics/<topic>/pNNNNN/consumer.ahead     ConsumerAheadFileName
//	topics/<topic>/pNNNNN/consumer.acked     ConsumerAckedFileName
//	topics/<topic>/pNNNNN/consumer.lease     ConsumerLeaseFileName
//	topics/<topic>/pNNNNN/scrub.progress     ScrubProgressFileName (scrubprogress.go)
//	topics/<topic>/pNNNNN/cursor.<name>      CursorFileName: a fan-out cursor's position, two slots (Cursor file)
//	topics/<topic>/pNNNNN/cursor-new.<name>  CursorTempFileName: a cursor file's whole replacement while written
//	topics/<topic>.stale-<id>/               StaleDirName: a quarantined incarnation
//	lost/<topic>.<id>/pNNNNN.<unix ms>/      LostDirName: a partition set aside, never served
//
// A topic name is 1 to 200 characters of [A-Za-z0-9._-], not "." or "..",
// and never contains ".stale-", so a quarantined directory can never be
// taken for a topic.
//
// # hwm and consumer.offset
//
//	offset  size  field
//	0       8     value  int64, >= 0
//
// An empty file holds no value. Any other length, or a negative value, is
// corrupt. The format has no checksum (it is the format older releases
// read), so callers clamp the value before trusting it.
//
// # consumer.ahead
//
// Two slots of 4096 bytes; slot i starts at byte i*4096. A writer overwrites
// one slot at a time, so a torn write damages at most one of them.
//
//	offset  size  field        rule
//	0       4     magic        "NRCA" (AheadMagic)
//	4       1     version      1 (AheadVersion)
//	5       1     flags        bit 0: truncated, the acked-ahead set did not fit
//	                           and only its lowest offsets are stored; bits 1-7 zero
//	6       2     reserved     zero
//	8       8     sequence     uint64 write sequence; the larger valid one wins
//	16      8     incarnation  the topic incarnation id's 8 bytes; zeros when none
//	24      8     frontier     int64 >= 0, the lowest offset not yet acked
//	32      4     count        number of acked-ahead offsets stored, <= listLen
//	36      4     listLen      bytes of the list, <= 4052
//	40      L     list         count minimal uvarints: o0-frontier-1, then oi-o(i-1)-1
//	                           (offsets strictly increasing, all above frontier)
//	40+L    ...   padding      zero up to byte 4092
//	4092    4     crc32c       Castagnoli over bytes [0:4092]
//
// The frontier is stored exactly as given, so a recovered frontier never
// passes an unacked offset. When the set does not fit, the offsets nearest
// the frontier are kept and the rest forgotten: after a crash those records
// are delivered again (at least once), never skipped.
//
// Decoding a file: an empty file holds no record; a file of one slot, or of
// one slot and a torn second one, is read for what it holds (the writer
// fills slot 0 first); a slot is usable when its checks pass and it belongs
// to the expected incarnation; the usable slot with the larger sequence
// wins (on a tie, the lower frontier). With no usable slot the caller falls
// back to consumer.offset.
//
// # Cursor file
//
// A fan-out cursor's position: two slots of 28 bytes, slot 0 at byte 0
// and slot 1 at byte 4096 (CursorSlotStride), so a sector or page torn
// while one is written never touches the other. A writer writes the slot
// the newest position is not in, with the next sequence, so a short or
// torn write damages only that slot and the other still holds the
// position before it. The bytes between the slots are never written and
// not read.
//
//	offset  size  field     rule
//	0       4     magic     "NRCU" (CursorMagic)
//	4       1     version   1 (CursorVersion)
//	5       3     reserved  zero
//	8       8     sequence  uint64 write sequence; the larger valid one wins
//	16      8     position  int64 >= 0, the next offset the cursor reads
//	24      4     crc32c    Castagnoli over bytes [0:24]
//
// Decoding a file: an empty file holds no position; a file of exactly 8
// bytes not opening with the magic is the older format (consumer.offset's,
// no checksum), read once and replaced whole by the writer; otherwise each
// slot present is checked, and of the valid ones the larger sequence wins
// (on a tie the lower position, so a decode never moves a cursor ahead of
// either slot). No valid slot, or a file longer than 4124 bytes
// (CursorFileSize), is damage: ErrCorrupt, and the caller starts the
// cursor again from the partition's first record.
//
// # consumer.acked
//
// The whole acked-ahead set, written by a clean close whose consumer.ahead
// record could hold only the set's lowest offsets: a temporary file,
// fdatasynced, renamed into place, the directory synced. It only adds
// acks: every offset in it was acked, so recovery adds those above the
// recovered frontier (and below the high watermark) to the set.
//
//	offset  size  field        rule
//	0       4     magic        "NRCK" (AckedMagic)
//	4       1     version      1 (AckedVersion)
//	5       3     reserved     zero
//	8       8     sequence     of the consumer.ahead record written with it
//	16      8     incarnation  as in consumer.ahead
//	24      8     frontier     int64 >= 0
//	32      4     count        offsets in the list, <= 100,000 (AckedMaxOffsets)
//	36      4     listLen      bytes of the list: the rest of the file but the crc
//	40      L     list         count minimal uvarints, as in consumer.ahead
//	40+L    4     crc32c       Castagnoli over bytes [0:40+L]
//
// # consumer.lease
//
// The partition's queue lease id floor: every lease id ever given for the
// partition is at most the floor, written (a temporary file, fdatasynced,
// renamed into place, the directory synced) before an id above the floor
// it held is given. 20 bytes.
//
//	offset  size  field
//	0       4     magic     "NRLF" (LeaseFloorMagic)
//	4       1     version   1 (LeaseFloorVersion)
//	5       3     reserved  zero
//	8       8     floor     uint64 <= 2^53 (MaxLeaseID)
//	16      4     crc32c    Castagnoli over bytes [0:16]
//
// An empty file holds no floor.
//
// # Incarnation marker
//
//	offset  size  field
//	0       16    id       16 lower-case hex characters, not all zeros
//	16      1     newline  "\n" (optional on read)
//
// The all-zero id is reserved: its 8 bytes mean "no id" in consumer.ahead.
//
// # Dictionary file
//
//	offset  size  field
//	0       4     magic      "NZD1"
//	4       4     id         big-endian, the zstd dictionary's id, not 0
//	8       8     trainedAt  big-endian Unix ms, not negative
//	16      4     length     big-endian, <= MaxDictionaryFileBytes (1 MiB)
//	20      4     crc32c     Castagnoli over bytes [4, 20) and the dictionary
//	24      n     dictionary zstd dictionary format, n = length, nothing after
//
// Written once (temporary file, fdatasync, rename, directory fsync) and
// never changed. A short file is ErrTruncated, any other mismatch ErrCorrupt.
package wire
