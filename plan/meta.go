package plan

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var bucketMeta = []byte("meta")

// MaxMetaBytes bounds one meta value.
const MaxMetaBytes = 16 << 20

// PutMeta stores value under key in the store's meta bucket, next to the
// plans and never mistaken for one: executors publish their heartbeat and
// what they know of the servers there, for watch, show and list.
func (s *BoltStore) PutMeta(_ context.Context, key string, value []byte) error {
	if len(value) > MaxMetaBytes {
		return fmt.Errorf("%w: meta %s: %d bytes, limit %d", ErrTooLarge, key, len(value), MaxMetaBytes)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put([]byte(key), value)
	})
}

// GetMeta returns the value stored under key, nil if there is none.
func (s *BoltStore) GetMeta(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketMeta); b != nil {
			if v := b.Get([]byte(key)); v != nil {
				out = append([]byte(nil), v...)
			}
		}
		return nil
	})
	return out, err
}
