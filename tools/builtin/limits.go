package builtin

// Limits bound what the built-in tools read, list and write. Zero fields mean the
// defaults of DefaultLimits.
type Limits struct {
	// MaxEntries is the most entries list_files returns (the model may ask for
	// fewer with max_entries).
	MaxEntries int
	// MaxDepth is how deep a recursive listing descends: the entries of the
	// listed directory are at depth 1.
	MaxDepth int
	// MaxLines is the most lines read_file returns at once.
	MaxLines int
	// MaxBytes is the most bytes read_file returns at once.
	MaxBytes int
	// MaxWriteBytes is the largest content write_file accepts.
	MaxWriteBytes int
}

// DefaultLimits returns the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		MaxEntries:    1000,
		MaxDepth:      8,
		MaxLines:      2000,
		MaxBytes:      64 * 1024,
		MaxWriteBytes: 1 << 20,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxLines <= 0 {
		l.MaxLines = d.MaxLines
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxWriteBytes <= 0 {
		l.MaxWriteBytes = d.MaxWriteBytes
	}
	return l
}

// sniffBytes is how much of a file is examined to tell text from binary.
const sniffBytes = 8 * 1024
