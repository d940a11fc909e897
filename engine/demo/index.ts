export { FakeBackend, type FakeModel, type Recorded, type Behaviour } from './backend.js';
export { FAKE_FAMILIES } from './families.js';
