package power

// addLive puts s among ep's live sessions (p.mu held), counting it in
// ep.nlive: the count a call's end checks (trimLocked) without reaching
// into the map, another object of another BMC's for each call in a large
// fleet (issue 35, point 4).
func (ep *endpoint) addLive(s *session) {
	if _, ok := ep.live[s]; !ok {
		ep.live[s] = struct{}{}
		ep.nlive++
	}
}

// dropLive takes s out of ep's live sessions (p.mu held), if it is there.
func (ep *endpoint) dropLive(s *session) {
	if _, ok := ep.live[s]; ok {
		delete(ep.live, s)
		ep.nlive--
	}
}
