package bfd

import "encoding/binary"

// nativeEndian reads control message integers (host byte order).
var nativeEndian = binary.NativeEndian
