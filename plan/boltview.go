package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// BoltMaxStartsPerPass is how many pending reboots a BoltStore view loads
// at most (GetView, ReadView), so how many reboots one pass starts at
// most, whatever the concurrency (PendingInView): a pass's read of the
// file stays short (an operator's command waits for it), and a plan whose
// concurrency is higher reaches it over several passes.
const BoltMaxStartsPerPass = 1536

// ViewRead is what BoltStore.ReadView copied from the file in one read
// transaction: the plan's header and the bytes of the reboot records of
// its view. View decodes them, without the file: a caller that holds the
// file only for the read (cmd/rebootctl's executor) decodes after letting
// it go.
type ViewRead struct {
	s        *BoltStore
	uuid     string
	h        header
	header   []byte
	members  map[string]int // from the cache; else servers/list
	servers  []byte
	list     []string
	pos      []int
	raws     [][]byte
	resolved bool
}

// GetView implements ViewStore: it reads the header, the records of the
// reboots in flight and of the next pending ones (at most
// BoltMaxStartsPerPass), nothing else (ReadView, then ViewRead.View).
func (s *BoltStore) GetView(ctx context.Context, uuid string) (View, error) {
	r, err := s.ReadView(ctx, uuid)
	if err != nil {
		return View{}, err
	}
	return r.View()
}

// ReadView reads, in one read transaction, what GetView decodes: the
// plan's header, its servers record (unless cached) and a copy of the
// bytes of the records of the reboots in flight and of the next pending
// ones (at most BoltMaxStartsPerPass). It decodes only the header.
func (s *BoltStore) ReadView(_ context.Context, uuid string) (ViewRead, error) {
	if err := ValidUUID(uuid); err != nil {
		return ViewRead{}, err
	}
	r := ViewRead{s: s, uuid: uuid}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(uuid))
		if b == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, uuid)
		}
		h, err := readIndexedHeader(b, uuid)
		if err != nil {
			return err
		}
		r.h, r.header = h, bytes.Clone(b.Get(keyHeader))
		if m, ok := s.cachedMembers(h); ok {
			r.members = m
		} else if r.servers, r.list, err = serversOf(b, h); err != nil {
			return err
		}
		r.pos = cutPositions(*h.Index, min(PendingInView(h.Plan), BoltMaxStartsPerPass))
		r.raws = make([][]byte, len(r.pos))
		// One cursor: the positions are ascending and mostly consecutive
		// (the reboots in flight, then the next pending ones), so most
		// records are the next key rather than a search from the root.
		c := b.Cursor()
		var key, raw []byte
		for k, i := range r.pos {
			want := rebootKey(i)
			if k > 0 && i == r.pos[k-1]+1 && key != nil {
				key, raw = c.Next()
			} else {
				key, raw = c.Seek(want)
			}
			if !bytes.Equal(key, want) || raw == nil {
				return fmt.Errorf("%w: plan %s: reboot record %d missing", ErrCorrupt, uuid, i)
			}
			r.raws[k] = bytes.Clone(raw)
		}
		return nil
	})
	if err != nil {
		return ViewRead{}, err
	}
	r.resolved = true
	return r, nil
}

// View decodes the view read (its records, and the servers record unless
// cached), reusing the records whose bytes did not change since the
// store's last view of the plan. It needs no transaction: the store may
// be closed.
func (r ViewRead) View() (View, error) {
	if !r.resolved {
		return View{}, fmt.Errorf("plan: a view decoded before it was read")
	}
	s, uuid := r.s, r.uuid
	members := r.members
	if members == nil {
		var err error
		if members, err = s.membersFrom(r.h, r.servers, r.list); err != nil {
			return View{}, err
		}
	}
	p := r.h.Plan
	p.Version = strconv.FormatUint(r.h.Version, 10)
	v := View{Plan: p, Pos: r.pos, Index: *r.h.Index, Members: members}
	v.Reboots = make([]Reboot, len(v.Pos))
	v.base = &viewBase{header: r.header, orig: make([]Reboot, len(v.Pos)), raws: r.raws, vers: make([]uint64, len(v.Pos))}
	s.mu.Lock()
	old := s.decoded[uuid]
	s.mu.Unlock()
	cache := make(map[int]decodedRecord, len(v.Pos))
	for k, i := range v.Pos {
		raw := r.raws[k]
		d, ok := old[i]
		if !ok || !bytes.Equal(d.raw, raw) {
			var rec record
			if err := json.Unmarshal(raw, &rec); err != nil {
				return View{}, fmt.Errorf("%w: plan %s: reboot record %d: %v", ErrCorrupt, uuid, i, err)
			}
			if rec.Index != i {
				return View{}, fmt.Errorf("%w: plan %s: record %d holds index %d", ErrCorrupt, uuid, i, rec.Index)
			}
			if members[rec.Reboot.ServerUUID] != i {
				return View{}, fmt.Errorf("%w: plan %s: record %d names server %s, listed at %d", ErrCorrupt, uuid, i, rec.Reboot.ServerUUID, members[rec.Reboot.ServerUUID])
			}
			d = decodedRecord{raw: raw, rec: rec}
		}
		cache[i] = d
		v.Reboots[k] = d.rec.Reboot.clone()
		v.base.orig[k] = d.rec.Reboot // never modified: cache and base share it
		v.base.vers[k] = d.rec.Version
	}
	s.mu.Lock()
	if s.decoded == nil {
		s.decoded = map[string]map[int]decodedRecord{}
	}
	s.decoded[uuid] = cache
	s.mu.Unlock()
	if err := v.check(); err != nil {
		return View{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return v, nil
}

// EncodeView encodes, ahead of BoltStore.PutView, the records of the
// reboots of v (a view read from a BoltStore) that changed since it was
// read: PutView then writes those bytes when the stored records are still
// the ones read (else it reads them and encodes again). A caller that
// holds the file only for the write (cmd/rebootctl's executor) encodes
// before taking it. A reboot changed again after EncodeView is encoded
// again by PutView. v is not modified; a view not read from a BoltStore
// is returned as it is.
func EncodeView(v View) (View, error) {
	if v.base == nil || len(v.base.vers) != len(v.Reboots) || len(v.base.orig) != len(v.Reboots) || len(v.Pos) != len(v.Reboots) {
		return v, nil
	}
	nb := *v.base
	nb.enc, nb.encFrom = make([][]byte, len(v.Reboots)), make([]Reboot, len(v.Reboots))
	for k, r := range v.Reboots {
		if sameReboot(nb.orig[k], r) {
			continue
		}
		raw, err := json.Marshal(record{Index: v.pos(k), Version: nb.vers[k] + 1, Reboot: r})
		if err != nil {
			return v, fmt.Errorf("plan: encode %s: %w", v.UUID, err)
		}
		nb.enc[k], nb.encFrom[k] = raw, r.clone()
	}
	v.base = &nb
	return v, nil
}
