package journal

import (
	"fmt"

	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/proto"
)

// The journal's records are protobuf messages, stored compressed (S2) when
// that makes them smaller: a proposal names each path it writes up to four
// times (its operation, the operation's leaves, its effective values and
// its rollback's before-images) and a history delta twice, so compression
// halves both. Every byte kept out of Badger is a byte its compactions and
// value-log GC do not copy again ("Records" in docs/bench.md).
//
// A compressed record is compressedRecord followed by the S2 block. A
// protobuf message never starts with a zero byte (it would be a field
// numbered 0), so records written plain (format 5 and before, and those
// compression would not shrink) read as they were.
const compressedRecord = 0x00

// compressFrom is the smallest encoded record worth compressing: below it
// a record has no repeated path to gain on and stays plain.
const compressFrom = 96

// encodeRecord encodes m as the journal stores it.
func encodeRecord(m proto.Message) ([]byte, error) {
	plain, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return compressRecord(plain), nil
}

// compressRecord returns the record to store for a message encoded plain:
// plain itself, or compressed if that makes it smaller.
func compressRecord(plain []byte) []byte {
	if len(plain) < compressFrom {
		return plain
	}
	c := make([]byte, 1+s2.MaxEncodedLen(len(plain)))
	c[0] = compressedRecord
	n := len(s2.Encode(c[1:], plain))
	if 1+n >= len(plain) {
		return plain
	}
	return c[:1+n]
}

// decodeRecord decodes into m a record encodeRecord wrote, or one written
// plain.
func decodeRecord(v []byte, m proto.Message) error {
	return decodeRecordWith(proto.UnmarshalOptions{}, v, m)
}

// decodeRecordWith is decodeRecord with opts.
func decodeRecordWith(opts proto.UnmarshalOptions, v []byte, m proto.Message) error {
	if len(v) > 0 && v[0] == compressedRecord {
		plain, err := s2.Decode(nil, v[1:])
		if err != nil {
			return fmt.Errorf("decompress record: %v: %w", err, ErrCorrupt)
		}
		v = plain
	}
	return opts.Unmarshal(v, m)
}
