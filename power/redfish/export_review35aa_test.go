package redfish

// Marks35aa reports whether c's system is suspect and doubtful now
// (readplace.go): review 35 round 27's tests log it to show the cause.
func (c *Controller) Marks35aa() (suspect, doubt bool) {
	return c.suspect.Load(), c.doubt.Load()
}
