package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// WAL and wal-index layout (https://sqlite.org/fileformat2.html#walformat and
// https://sqlite.org/walformat.html#the_wal_index_header).
const (
	walHeaderSize  = 32
	walFrameHeader = 24
	walMagicLE     = 0x377f0682 // checksums over little-endian words
	walMagicBE     = 0x377f0683 // checksums over big-endian words
	shmHeaderSize  = 48         // one copy of the wal-index header; two are kept
)

// readVerifiedWAL reads the committed part of the WAL (its header and
// frames 1 to mxFrame, the last frame of the last committed transaction as
// the wal-index records it) and checks it the way SQLite's recovery does:
// the header's checksum, then each frame's salts and the checksum chain,
// which covers every byte of every frame. A WAL whose bytes changed since
// SQLite wrote them (pages the OS dropped after a failed fsync and read back
// from the disk) fails the check. The writer and the checkpointer must be
// stopped while it runs.
func readVerifiedWAL(wal *os.File, shmPath string) ([]byte, error) {
	shm, err := os.Open(shmPath)
	if err != nil {
		return nil, err
	}
	defer shm.Close()
	idx := make([]byte, 2*shmHeaderSize)
	if _, err := shm.ReadAt(idx, 0); err != nil {
		return nil, fmt.Errorf("read the wal-index header: %w", err)
	}
	if string(idx[:shmHeaderSize]) != string(idx[shmHeaderSize:]) {
		return nil, errors.New("the two copies of the wal-index header differ (a write is in progress)")
	}
	ne := binary.NativeEndian
	pageSize := int64(ne.Uint16(idx[14:16]))
	if pageSize == 1 {
		pageSize = 65536
	}
	mxFrame := int64(ne.Uint32(idx[16:20]))
	salt := string(idx[32:40]) // copied from the WAL header as they are
	if mxFrame == 0 {
		return nil, nil // nothing committed in the WAL since it was last reset
	}
	frame := walFrameHeader + pageSize
	data := make([]byte, walHeaderSize+mxFrame*frame)
	if _, err := wal.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("read %d frames of the WAL: %w", mxFrame, err)
	}
	be := binary.BigEndian
	var order binary.ByteOrder
	switch be.Uint32(data[0:4]) {
	case walMagicLE:
		order = binary.LittleEndian
	case walMagicBE:
		order = binary.BigEndian
	default:
		return nil, errors.New("bad WAL header magic")
	}
	if int64(be.Uint32(data[8:12])) != pageSize {
		return nil, errors.New("the WAL header's page size does not match the wal-index")
	}
	if string(data[16:24]) != salt {
		return nil, errors.New("the WAL header's salts do not match the wal-index")
	}
	s0, s1 := walChecksum(order, data[:24], 0, 0)
	if s0 != be.Uint32(data[24:28]) || s1 != be.Uint32(data[28:32]) {
		return nil, errors.New("bad WAL header checksum")
	}
	for i := range mxFrame {
		f := data[walHeaderSize+i*frame : walHeaderSize+(i+1)*frame]
		if string(f[8:16]) != salt {
			return nil, fmt.Errorf("WAL frame %d: salts do not match the header", i+1)
		}
		s0, s1 = walChecksum(order, f[:8], s0, s1)
		s0, s1 = walChecksum(order, f[walFrameHeader:], s0, s1)
		if s0 != be.Uint32(f[16:20]) || s1 != be.Uint32(f[20:24]) {
			return nil, fmt.Errorf("WAL frame %d of %d: bad checksum", i+1, mxFrame)
		}
		if i == mxFrame-1 && be.Uint32(f[4:8]) == 0 {
			return nil, fmt.Errorf("WAL frame %d, the last committed one, is not a commit frame", i+1)
		}
	}
	return data, nil
}

// walChecksum continues SQLite's WAL checksum (s0, s1) over b, a multiple of
// 8 bytes read as 32-bit words in order.
func walChecksum(order binary.ByteOrder, b []byte, s0, s1 uint32) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}
