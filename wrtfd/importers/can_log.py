"""placeholder"""
def is_savvycan_header(line: bytes) -> bool:
    return line.replace(b" ", b"").lower().startswith(b"timestamp,id,extended,")
