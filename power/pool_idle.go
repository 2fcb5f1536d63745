package power

// idleList is the Pool's sessions with no call running, least recently
// used first (Pool.idle), linked through the sessions themselves: a call
// takes its session off it and puts it back without allocating.
type idleList struct {
	front, back *session
	n           int
}

// idleLink is a session's place on the idle list.
type idleLink struct {
	prev, next *session
	on         bool // on the list
}

// Len returns the number of sessions on l.
func (l *idleList) Len() int { return l.n }

// Front returns the least recently used session on l, or nil.
func (l *idleList) Front() *session { return l.front }

// PushBack puts s, on no list, at the back of l.
func (l *idleList) PushBack(s *session) {
	s.idle = idleLink{prev: l.back, on: true}
	if l.back != nil {
		l.back.idle.next = s
	} else {
		l.front = s
	}
	l.back = s
	l.n++
}

// Remove takes s, on l, off it.
func (l *idleList) Remove(s *session) {
	if s.idle.prev != nil {
		s.idle.prev.idle.next = s.idle.next
	} else {
		l.front = s.idle.next
	}
	if s.idle.next != nil {
		s.idle.next.idle.prev = s.idle.prev
	} else {
		l.back = s.idle.prev
	}
	s.idle = idleLink{}
	l.n--
}
