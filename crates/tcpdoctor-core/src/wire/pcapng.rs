//! pcapng: SHB, IDB, EPB, SPB (and the obsolete PB); several interfaces and link types per file.
