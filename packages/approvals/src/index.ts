export { planOf, planHash, type Plan, type PlanInput, type PlanResource } from "./plan-hash.js";
export {
  MongoApprovalStore,
  approvalIdFor,
  type ApprovalRequestRecord,
  type ApprovalDecisionRecord,
  type ApprovalConsumptionRecord,
  type ApprovalOutcome,
  type ApprovalFailureCode,
} from "./approval-store.js";
export { verifyAndConsume, type ApprovalLedger, type ApprovalPresentation, type ApprovalCheck } from "./verify-and-consume.js";
