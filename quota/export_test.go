package quota

import "time"

// SetClock makes m read the time from now (a test's fixed clock).
func SetClock(m *Meter, now func() time.Time) { m.now = now }
