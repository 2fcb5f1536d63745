package plan

// BoltNoSync turns off bbolt's fsync on every commit, for tests whose
// crashes are a process's (an executor killed between two steps), not the
// machine's: the page cache survives them, so what they check is the same,
// and the tests no longer wait on the disk.
func BoltNoSync(s *BoltStore) { s.db.NoSync = true }
