package reboot

import "time"

// lostCalls remembers the returns (monotonic) of the last power-off and
// the last press whose answer was lost (assumption A5): the BMC may carry
// them out until Config.LostLanding after that.
type lostCalls struct {
	off, press     time.Duration
	anyOff, pressd bool
}

// note records a power-off (a press if press) that returned at done
// without an answer.
func (l *lostCalls) note(press bool, done time.Duration) {
	l.off, l.anyOff = max(l.off, done), true
	if press {
		l.press, l.pressd = max(l.press, done), true
	}
}

// since caps sinceOff and sincePress, taken at m, to count the lost calls
// as sent landing after their return.
func (l lostCalls) since(sinceOff, sincePress, m, landing time.Duration) (time.Duration, time.Duration) {
	if l.anyOff {
		sinceOff = min(sinceOff, m-l.off-landing)
	}
	if l.pressd {
		sincePress = min(sincePress, m-l.press-landing)
	}
	return sinceOff, sincePress
}
