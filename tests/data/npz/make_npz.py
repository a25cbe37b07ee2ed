# Made the .npz files here with Debian 12's python3-numpy 1.24.2 (/usr/bin/python3 make_npz.py);
# tests/common/npz_test.cpp reads them and checks the values in expected.json, which numpy wrote.
import io
import json
import zipfile

import numpy as np

arrays = {
    'kernel': np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    'steps': np.array([3, -1, 7, 2**40], dtype=np.int64),
    'mask': np.array([True, False, True]),
    'scalar': np.float64(2.5),
    'fortran': np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
}
np.savez('stored.npz', **arrays)             # zip members stored
np.savez_compressed('deflated.npz', **arrays)  # zip members deflated
# A zip that np.savez would never write: a member that is not an .npy file.
with zipfile.ZipFile('not_npy_member.npz', 'w') as archive:
    member = io.BytesIO()
    np.save(member, arrays['kernel'])
    archive.writestr('kernel.npy', member.getvalue())
    archive.writestr('notes.txt', 'written by hand, not by np.savez')
expected = {
    name: {'dtype': str(np.asarray(value).dtype), 'shape': list(np.shape(value)),
           'values': np.asarray(value).ravel(order='C').tolist()}
    for name, value in arrays.items()
}
with open('expected.json', 'w') as out:
    json.dump({'numpy': np.__version__, 'arrays': expected}, out, indent=1)
